import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { admissionOrder, parseWaves, waveSizes } from "../../../../shared/core/rollout/waves.js";

describe("parseWaves", () => {
  it("reads nodes and percentages", () => {
    expect(parseWaves("1, 10%,50%,100%")).toEqual([{ nodes: 1 }, { percent: 10 }, { percent: 50 }, { percent: 100 }]);
  });

  it.each(["", "0", "x", "150%", "0%", "-1"])("refuses %j with a message that names waves", (text) => {
    expect(() => parseWaves(text)).toThrow(/waves/);
  });
});

describe("waveSizes", () => {
  it("gives the default waves on 3, 20 and 1,000 nodes", () => {
    const waves = parseWaves("1,10%,50%,100%");
    expect(waveSizes(waves, 3)).toEqual([1, 2, 3]);
    expect(waveSizes(waves, 20)).toEqual([1, 2, 10, 20]);
    expect(waveSizes(waves, 1000)).toEqual([1, 100, 500, 1000]);
    expect(waveSizes(waves, 0)).toEqual([]);
  });

  it("grows strictly and ends at the whole fleet, whatever the waves", () => {
    const wave = fc.oneof(
      fc.integer({ min: 1, max: 50 }).map((nodes) => ({ nodes })),
      fc.integer({ min: 1, max: 100 }).map((percent) => ({ percent })),
    );
    fc.assert(
      fc.property(fc.array(wave, { minLength: 1, maxLength: 6 }), fc.integer({ min: 1, max: 300 }), (waves, total) => {
        const sizes = waveSizes(waves, total);
        expect(sizes.at(-1)).toBe(total);
        for (let i = 1; i < sizes.length; i++) expect(sizes[i]!).toBeGreaterThan(sizes[i - 1]!);
        expect(sizes[0]!).toBeGreaterThanOrEqual(1);
      }),
    );
  });
});

describe("admissionOrder", () => {
  it("is a stable order of the names alone: the same set in any order gives the same order", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/), { maxLength: 30 }), (names) => {
        const order = admissionOrder(names);
        expect([...order].sort()).toEqual([...names].sort());
        expect(admissionOrder([...names].reverse())).toEqual(order);
      }),
    );
  });

  it("keeps a node's place relative to the others when nodes join", () => {
    const before = admissionOrder(["node-a", "node-b", "node-c"]);
    const after = admissionOrder(["node-a", "node-b", "node-c", "node-d"]);
    expect(after.filter((n) => n !== "node-d")).toEqual(before);
  });
});
