import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DRAW_RANGE, WEIGHTS_MAP } from "../../../../shared/core/haproxy-config/gateway-weights.js";
import type { PatternFile } from "../../../../shared/core/haproxy-config/pattern-files.js";
import { swapOrder } from "../../../../shared/core/haproxy-config/swap-order.js";

const EXACT = "maps/gw.8080.exact.map";
const PREFIX = "maps/gw.8080.prefix.map";

/** A rule's lines in the weights map: its range split between backends. */
function ruleLines(id: number, backends: readonly string[]): string[] {
  const base = id * DRAW_RANGE;
  const step = Math.floor(DRAW_RANGE / backends.length);
  return backends.map(
    (b, i) =>
      `${base + i * step}:${i === backends.length - 1 ? base + DRAW_RANGE - 1 : base + (i + 1) * step - 1} ${b}`,
  );
}

/** The rule numbers whose range the weights map holds no line of, among those the match maps name. */
function unheld(files: ReadonlyMap<string, readonly string[]>): number[] {
  const held = new Set((files.get(WEIGHTS_MAP) ?? []).map((l) => Math.floor(Number(l.split(":")[0]) / DRAW_RANGE)));
  return [EXACT, PREFIX]
    .flatMap((path) => files.get(path) ?? [])
    .map((line) => Number(line.split(" ")[1]) / DRAW_RANGE)
    .filter((id) => !held.has(id));
}

function applyAll(
  running: ReadonlyMap<string, readonly string[]>,
  swaps: readonly PatternFile[],
  each: (files: ReadonlyMap<string, readonly string[]>) => void,
): Map<string, readonly string[]> {
  const live = new Map(running);
  for (const swap of swaps) {
    live.set(swap.path, swap.entries);
    each(live);
  }
  return live;
}

describe("swapOrder", () => {
  it("swaps a route removed out of the match maps before its range leaves the weights map", () => {
    const running = new Map<string, readonly string[]>([
      [WEIGHTS_MAP, [...ruleLines(1, ["gw:a"]), ...ruleLines(2, ["gw:b"])]],
      [EXACT, [`/a ${DRAW_RANGE}`, `/b ${2 * DRAW_RANGE}`]],
    ]);
    const changed: PatternFile[] = [
      { path: WEIGHTS_MAP, entries: ruleLines(1, ["gw:a"]) },
      { path: EXACT, entries: [`/a ${DRAW_RANGE}`] },
    ];
    const swaps = swapOrder(running, changed);
    expect(swaps.map((s) => s.path)).toEqual([WEIGHTS_MAP, EXACT, WEIGHTS_MAP]);
    expect(swaps[0]!.entries).toEqual([...ruleLines(1, ["gw:a"]), ...ruleLines(2, ["gw:b"])]);
    expect(swaps[2]!.entries).toEqual(ruleLines(1, ["gw:a"]));
    applyAll(running, swaps, (live) => expect(unheld(live)).toEqual([]));
  });

  it("swaps the weights map first, once, for a route added or weights changed", () => {
    const running = new Map<string, readonly string[]>([
      [WEIGHTS_MAP, ruleLines(1, ["gw:a"])],
      [EXACT, [`/a ${DRAW_RANGE}`]],
    ]);
    const added: PatternFile[] = [
      { path: EXACT, entries: [`/a ${DRAW_RANGE}`, `/b ${3 * DRAW_RANGE}`] },
      { path: WEIGHTS_MAP, entries: [...ruleLines(1, ["gw:a"]), ...ruleLines(3, ["gw:b"])] },
    ];
    expect(swapOrder(running, added).map((s) => s.path)).toEqual([WEIGHTS_MAP, EXACT]);
    const weights: PatternFile[] = [{ path: WEIGHTS_MAP, entries: ruleLines(1, ["gw:a", "gw:b"]) }];
    expect(swapOrder(running, weights)).toEqual(weights);
  });

  it("leaves a change without the weights map in its order", () => {
    const changed: PatternFile[] = [
      { path: "patterns/default.web.allow", entries: ["10.0.0.0/8"] },
      { path: EXACT, entries: [] },
    ];
    expect(swapOrder(new Map(), changed)).toEqual(changed);
  });

  it("never lets the match maps name a rule the weights map does not hold, whatever routes come and go", () => {
    const ids = fc.uniqueArray(fc.integer({ min: 0, max: 40 }), { maxLength: 8 });
    const state = ids.chain((rules) =>
      fc.record({
        rules: fc.constant(rules),
        exact: fc.subarray(rules),
        prefix: fc.subarray(rules),
        backends: fc.array(fc.constantFrom("gw:a", "gw:b", "gw:c"), { minLength: 1, maxLength: 3 }),
      }),
    );
    const files = (s: { rules: number[]; exact: number[]; prefix: number[]; backends: string[] }) =>
      new Map<string, readonly string[]>([
        [WEIGHTS_MAP, [...s.rules].sort((a, b) => a - b).flatMap((id) => ruleLines(id, s.backends))],
        [EXACT, s.exact.map((id) => `/e${id} ${id * DRAW_RANGE}`)],
        [PREFIX, s.prefix.map((id) => `/p${id}/ ${id * DRAW_RANGE}`)],
      ]);
    fc.assert(
      fc.property(state, state, (a, b) => {
        const from = files(a);
        const to = files(b);
        const changed = [...to]
          .filter(([path, entries]) => JSON.stringify(from.get(path)) !== JSON.stringify(entries))
          .map(([path, entries]) => ({ path, entries }));
        const end = applyAll(from, swapOrder(from, changed), (live) => expect(unheld(live)).toEqual([]));
        expect(end).toEqual(to);
      }),
      { numRuns: 500 },
    );
  });
});
