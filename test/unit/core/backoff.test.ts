import { describe, expect, it } from "vitest";
import { backoffDelay } from "../../../shared/core/backoff.js";

describe("backoffDelay", () => {
  it.each([
    [1, 500],
    [2, 1000],
    [3, 2000],
    [4, 4000],
    [5, 5000],
    [40, 5000],
  ])("waits, before retry %i, %i ms (500 ms doubling, at most 5 s)", (retry, ms) => {
    expect(backoffDelay({ initialMs: 500, maxMs: 5000 }, retry)).toBe(ms);
  });

  it("treats a retry number below 1 as the first retry", () => {
    expect(backoffDelay({ initialMs: 500, maxMs: 5000 }, 0)).toBe(500);
  });
});
