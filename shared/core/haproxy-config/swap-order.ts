/*
 * The order the agent swaps a change's pattern files and maps in through the runtime API, so
 * that no request meets a half-applied change. Each swap is atomic, but a change of Gateway
 * routes spans several files: the match maps (gateway-maps.ts) give a rule's range in the weights
 * map (gateway-weights.ts), and a range the weights map does not hold answers 500. A route added
 * needs its range before its match; a route removed needs its match gone before its range.
 *
 * So when the weights map changes, it is swapped twice around the other files: first to a bridge
 * that holds every new line and the lines of the rules the new map no longer has (each rule's
 * lines lie in its own range of DRAW_RANGE keys), then, once the match maps name only new rules,
 * to its new lines. A change of weights only, or one that adds rules only, needs no bridge: the
 * new lines go first.
 *
 * Pure: the running files and the changed ones in, the swaps in order out.
 */

import { DRAW_RANGE, WEIGHTS_MAP } from "./gateway-weights.js";
import type { PatternFile } from "./pattern-files.js";

/** The rule a weights map line belongs to: its range's low key over DRAW_RANGE. */
function ruleOf(line: string): number {
  return Math.floor(Number(line.slice(0, line.indexOf(":"))) / DRAW_RANGE);
}

function lowKey(line: string): number {
  return Number(line.slice(0, line.indexOf(":")));
}

/** The files to swap, in order; a path may appear twice (the weights map's bridge, then its lines). */
export function swapOrder(
  running: ReadonlyMap<string, readonly string[]>,
  changed: readonly PatternFile[],
): PatternFile[] {
  const weights = changed.find((f) => f.path === WEIGHTS_MAP);
  if (weights === undefined) return [...changed];
  const others = changed.filter((f) => f !== weights);
  const kept = new Set(weights.entries.map(ruleOf));
  const gone = (running.get(WEIGHTS_MAP) ?? []).filter((line) => !kept.has(ruleOf(line)));
  if (gone.length === 0 || others.length === 0) return [weights, ...others];
  const bridge = [...weights.entries, ...gone].sort((a, b) => lowKey(a) - lowKey(b));
  return [{ path: WEIGHTS_MAP, entries: bridge }, ...others, weights];
}
