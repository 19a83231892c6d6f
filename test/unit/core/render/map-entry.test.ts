import { describe, expect, it } from "vitest";
import { entryOf } from "../../../../shared/core/render/map-entry.js";

describe("entryOf", () => {
  it("makes a value once per key and returns the stored one after", () => {
    const map = new Map<string, number[]>();
    let made = 0;
    const make = () => {
      made += 1;
      return [];
    };
    entryOf(map, "a", make).push(1);
    entryOf(map, "a", make).push(2);
    entryOf(map, "b", make).push(3);
    expect([...map]).toEqual([
      ["a", [1, 2]],
      ["b", [3]],
    ]);
    expect(made).toBe(2);
  });
});
