import { describe, expect, it } from "vitest";
import { SweptMap } from "../../../../shared/core/model/swept-map.js";

describe("SweptMap", () => {
  it("forgets at the end of a pass what the pass did not see", () => {
    const map = new SweptMap<number>();
    map.begin();
    map.set("a", "x", 1);
    map.set("a", "y", 2);
    map.set("b", "z", 3);
    map.sweep();
    expect(map.size).toBe(3);

    map.begin();
    expect(map.touch("a", "x")).toBe(true);
    map.set("b", "z", 4);
    map.sweep();
    expect([map.get("a", "x"), map.get("a", "y"), map.get("b", "z"), map.size]).toEqual([1, undefined, 4, 2]);
  });

  it("counts a name seen twice in one pass once, so nothing it saw is swept", () => {
    const map = new SweptMap<string>();
    map.begin();
    map.set("ns", "dup", "first");
    map.begin();
    expect(map.touch("ns", "dup")).toBe(true);
    expect(map.touch("ns", "dup")).toBe(false);
    map.set("ns", "dup", "second");
    map.set("ns", "new", "n");
    map.sweep();
    expect([map.get("ns", "dup"), map.get("ns", "new"), map.size]).toEqual(["second", "n", 2]);
  });

  it("a delete during a pass keeps the count right: the pass still sweeps what it did not see", () => {
    const map = new SweptMap<number>();
    map.begin();
    map.set("ns", "a", 1);
    map.set("ns", "b", 2);
    map.set("ns", "c", 3);
    map.begin();
    map.touch("ns", "a");
    map.delete("ns", "a");
    map.touch("ns", "b");
    map.sweep();
    expect([map.get("ns", "a"), map.get("ns", "b"), map.get("ns", "c"), map.size]).toEqual([
      undefined,
      2,
      undefined,
      1,
    ]);
  });

  it("touching what is not there is no sighting", () => {
    const map = new SweptMap<number>();
    map.begin();
    expect(map.touch("ns", "none")).toBe(false);
    expect(map.generation).toBe(1);
  });
});
