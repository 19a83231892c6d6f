/*
 * The backend weights of Gateway API rules as a map the agent changes without a reload
 * (pattern-files.ts, `prepare map` … `commit map`), so that a change of weights only is a change
 * of map lines.
 *
 * A rule draws an integer in its own range of the map's keys, the rule's number times DRAW_RANGE
 * plus `rand(DRAW_RANGE)`, and takes the backend the map gives for it (`map_int`: a key
 * `<lo>:<hi>` is an integer range). A rule's number is a hash of what names it (drawIds), not its
 * position: a route added or removed leaves the other rules' numbers, hence their lines and the
 * config lines that name them, as they were. Each share of the rule holds a run
 * of its range as long as its weight's part of the total, rounded down to 1/DRAW_RANGE; a share
 * of weight 0 holds none; a rule whose weights are all 0 gives its whole range to the 500
 * backend (the spec: no backend with a weight answers 500).
 *
 *   maps/gateway.weights.map
 *   0:734002 gw:default:v1:8080             rule 0: v1 70, v2 30, v3 0
 *   734003:1048575 gw:default:v2:8080
 *
 * Pure, and every line is checked against the grammar both ways: nothing unvalidated reaches a
 * file or a runtime command.
 */

import { compareStrings } from "../compare.js";

export const WEIGHTS_MAP = "maps/gateway.weights.map";

/** Draws per rule: shares are split at this precision. */
export const DRAW_RANGE = 1 << 20;

/** A key range and a Gateway backend's name (core/gateway/backend-refs.ts, render.ts's `gw:500`). */
const LINE = /^(\d{1,15}):(\d{1,15}) gw:[a-z0-9][a-z0-9:.-]{0,299}$/;

/** Why `line` cannot be a line of the weights map, or null when it can. */
export function weightLineError(line: string): string | null {
  const m = LINE.exec(line);
  if (!m) return "is not <lo>:<hi> <Gateway backend>";
  return Number(m[1]) <= Number(m[2]) ? null : "is an empty range";
}

/** Rule numbers: below 2^29, so that a key (number × DRAW_RANGE + draw) fits the 15 digits of LINE. */
const ID_BITS = 29;

/** FNV-1a over UTF-16 code units: a spread that does not depend on the platform. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h >>> (32 - ID_BITS);
}

/**
 * A number for each key (distinct keys), from its hash; keys that collide take the next free
 * number, in key order, so the numbers depend on the set of keys and not on their order.
 */
export function drawIds(keys: readonly string[]): Map<string, number> {
  const taken = new Set<number>();
  const ids = new Map<string, number>();
  for (const key of [...keys].sort(compareStrings)) {
    let id = hash(key);
    while (taken.has(id)) id = (id + 1) % 2 ** ID_BITS;
    taken.add(id);
    ids.set(key, id);
  }
  return ids;
}

/** A rule's number (drawIds) and shares: the backend of each (null: an invalid reference, answered by `invalid`) and its weight. */
export interface WeightedRule {
  id: number;
  picks: ReadonlyArray<{ backend: string | null; weight: number }>;
}

/** The map's lines for the rules, each in the range of its number, sorted by key. */
export function weightMapLines(rules: readonly WeightedRule[], invalid: string): string[] {
  const lines: string[] = [];
  for (const rule of [...rules].sort((a, b) => a.id - b.id)) {
    const base = rule.id * DRAW_RANGE;
    const total = rule.picks.reduce((sum, p) => sum + p.weight, 0);
    if (total === 0) {
      lines.push(`${base}:${base + DRAW_RANGE - 1} ${invalid}`);
      continue;
    }
    let upTo = 0;
    for (const p of rule.picks) {
      const lo = Math.floor((upTo * DRAW_RANGE) / total);
      upTo += p.weight;
      const hi = Math.floor((upTo * DRAW_RANGE) / total) - 1;
      if (hi >= lo) lines.push(`${base + lo}:${base + hi} ${p.backend ?? invalid}`);
    }
  }
  return lines;
}
