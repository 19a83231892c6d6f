import { describe, expect, it } from "vitest";
import { compareStrings } from "../../../shared/core/compare.js";

describe("compareStrings", () => {
  it.each([
    ["a", "b", -1],
    ["b", "a", 1],
    ["a", "a", 0],
    ["Z", "a", -1],
    ["shop/", "shop-a/", 1],
    ["é", "z", 1],
  ])("orders %j before or after %j by code unit (%i), whatever the locale", (a, b, sign) => {
    expect(Math.sign(compareStrings(a, b))).toBe(sign);
  });

  it("sorts as the < operator would", () => {
    expect(["b", "B", "a", "_", "10", "9"].sort(compareStrings)).toEqual(["10", "9", "B", "_", "a", "b"]);
  });
});
