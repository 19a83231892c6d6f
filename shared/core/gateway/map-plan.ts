/*
 * Which of a frontend's match entries live in its match maps (haproxy-config/gateway-maps.ts)
 * and which keep a line of their own, so that a route added, removed or pointed elsewhere is a
 * change of map lines the agent applies without a reload, and a request still goes to the rule
 * the spec's precedence (precedence.ts) picks.
 *
 * The frontend tries its entries in three stages, in precedence order (the hostname comes
 * first in it): exact hostnames, wildcards, no hostname. In the first and last stage it tries
 * the stage's line entries in order, then the maps: the Exact paths, then the longest prefix.
 * An entry goes to a map when
 *   - its rule draws its backend in the weights map and has no filter (`base`);
 *   - it matches a path and nothing else: no method, header or query parameter;
 *   - its hostname is exact or none (a request may reach wildcards of several lengths: lines);
 *   - its key fits the maps' grammar, and a prefix ends in at most one `/` (the API refuses
 *     more: with two, its length would rank it above a longer prefix);
 *   - no line entry of its stage that comes after it in precedence may match a request it
 *     matches (a line is tried before the maps; the test is on host and path only, so it errs
 *     towards lines).
 * Within a stage the maps then give the first entry in precedence order: for one host, every
 * Exact path comes before every prefix, a longer prefix before a shorter one (its key holds at
 * least two characters more, its value at least one), and of two entries with one key the
 * first is kept. The entries are decided from the last, so the entries whose lines make an
 * earlier entry a line are known when it is decided.
 *
 * Pure: a frontend and its rules' bases in, the steps and map lines out.
 */

import { compareStrings } from "../compare.js";
import { isGatewayMapKey } from "../haproxy-config/gateway-maps.js";
import type { GatewayFrontend, MatchEntry, ResolvedRule } from "./routing.js";

/** A line entry (by its index in the frontend's entries), or the maps' lookups of a stage. */
export type MapStep = { kind: "line"; entry: number } | { kind: "maps"; withHost: boolean };

export interface FrontendMaps {
  /** The order the frontend tries them in. */
  steps: MapStep[];
  /** Map lines `<key> <base>`, sorted by key. */
  exact: string[];
  prefix: string[];
}

/** The key a path part of an entry has: the Exact path, or the prefix up to its last `/`, plus `/`. */
function pathKey(e: MatchEntry): string {
  return e.path.type === "Exact" ? e.path.value : `${e.path.value.replace(/\/+$/, "")}/`;
}

function stageOf(e: MatchEntry): number {
  return e.host === null ? 2 : e.host.wildcard ? 1 : 0;
}

/** The entry's map key, or null when it keeps a line whatever else there is. */
function mapKey(e: MatchEntry, base: number | undefined): string | null {
  if (base === undefined || e.method !== null || e.headers.length > 0 || e.queryParams.length > 0) return null;
  if (e.host?.wildcard) return null;
  if (e.path.type === "PathPrefix" && e.path.value.endsWith("//")) return null;
  const key = `${e.host?.name ?? ""}${pathKey(e)}`;
  return isGatewayMapKey(key) ? key : null;
}

/** Whether some request path matches both entries' paths (`path,concat(/)` begins with a prefix key). */
function pathsOverlap(a: MatchEntry, b: MatchEntry): boolean {
  const ka = pathKey(a);
  const kb = pathKey(b);
  if (a.path.type === "Exact" && b.path.type === "Exact") return ka === kb;
  if (a.path.type === "Exact") return `${ka}/`.startsWith(kb);
  if (b.path.type === "Exact") return `${kb}/`.startsWith(ka);
  return ka.startsWith(kb) || kb.startsWith(ka);
}

/**
 * The steps and maps of `f`. `base`: for a rule without filters that draws in the weights map,
 * its number there times DRAW_RANGE; undefined for any other rule.
 */
export function planFrontendMaps(f: GatewayFrontend, base: (rule: ResolvedRule) => number | undefined): FrontendMaps {
  const mapped = new Map<number, string>();
  const linesAfter: MatchEntry[] = [];
  for (let at = f.entries.length - 1; at >= 0; at--) {
    const e = f.entries[at]!;
    const key = mapKey(e, base(f.rules[e.rule]!));
    const shadowed = linesAfter.some(
      (l) => stageOf(l) === stageOf(e) && l.host?.name === e.host?.name && pathsOverlap(e, l),
    );
    if (key !== null && !shadowed) mapped.set(at, key);
    else linesAfter.push(e);
  }
  const steps: MapStep[] = [];
  const exact = new Map<string, number>();
  const prefix = new Map<string, number>();
  let stage = 0;
  const closeStages = (upTo: number) => {
    for (; stage < upTo; stage++) if (stage !== 1) steps.push({ kind: "maps", withHost: stage === 0 });
  };
  f.entries.forEach((e, at) => {
    closeStages(stageOf(e));
    const key = mapped.get(at);
    if (key === undefined) steps.push({ kind: "line", entry: at });
    else {
      const map = e.path.type === "Exact" ? exact : prefix;
      if (!map.has(key)) map.set(key, base(f.rules[e.rule]!)!);
    }
  });
  closeStages(3);
  const lines = (m: Map<string, number>) =>
    [...m].sort(([a], [b]) => compareStrings(a, b)).map(([key, value]) => `${key} ${value}`);
  return { steps, exact: lines(exact), prefix: lines(prefix) };
}
