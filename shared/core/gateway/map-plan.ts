/*
 * Which of a frontend's match entries live in its match maps (haproxy-config/gateway-maps.ts)
 * and which keep a line of their own, so that a route added, removed or pointed elsewhere is a
 * change of map lines the agent applies without a reload, and a request still goes to the rule
 * the spec's precedence (precedence.ts) picks.
 *
 * The frontend tries its entries in three stages, in precedence order (the hostname comes
 * first in it): exact hostnames, wildcards, no hostname. In the first and last stage it tries
 * the stage's line entries in order, then the header maps (for each header name they hold, the
 * request's last value of it: the Exact paths, then the longest prefix), then the path maps
 * (the Exact paths, then the longest prefix). In the wildcard stage, the line entries, then for
 * each number of labels the maps' wildcards have, most first (a wildcard of more labels has more
 * characters, and the spec ranks it first), the host's last labels as `*.<labels>` in the path
 * maps, when the host has a label before them. An entry goes to a path map when
 *   - its rule draws its backend in the weights map and has no filter (`base`);
 *   - it matches a path and nothing else: no method, header or query parameter;
 *   - its hostname is exact, a wildcard or none;
 *   - its key fits the maps' grammar, and a prefix ends in at most one `/` (the API refuses
 *     more: with two, its length would rank it above a longer prefix);
 *   - no line entry, nor header map entry, of its stage that comes after it in precedence may
 *     match a request it matches (those are tried before the path maps; the test is on host and
 *     path only, so it errs towards lines).
 * An entry that matches a path and one header (its value in the header grammar of
 * haproxy-config/gateway-maps.ts) and nothing else goes to a header map on the same terms, where
 * what must not come after it is a line entry, or a header map entry on another header name (a
 * request may carry both headers, and the lookups go name by name). On one name a request has one
 * value, and the lookups of that name give the first entry in precedence order as the path maps do.
 * Within a stage the maps then give the first entry in precedence order: for one host, every
 * Exact path comes before every prefix, a longer prefix before a shorter one (its key holds at
 * least two characters more, its value at least one), and of two entries with one key the
 * first is kept; an entry with a header comes before one without on the same path, as the spec
 * ranks more headers first. The entries are decided from the last, so the entries that make an
 * earlier entry a line are known when it is decided.
 *
 * Pure: a frontend and its rules' bases in, the steps and map lines out.
 */

import { compareStrings } from "../compare.js";
import { headerMapKey, isGatewayMapKey } from "../haproxy-config/gateway-maps.js";
import type { GatewayFrontend, MatchEntry, ResolvedRule } from "./routing.js";

/**
 * A line entry (by its index in the frontend's entries), the maps' lookups of a stage, or the
 * wildcards' lookups (for each number of labels `wildcardLabels` holds).
 */
export type MapStep = { kind: "line"; entry: number } | { kind: "maps"; withHost: boolean } | { kind: "wildcards" };

export interface FrontendMaps {
  /** The order the frontend tries them in. */
  steps: MapStep[];
  /** Map lines `<key> <base>`, sorted by key. */
  exact: string[];
  prefix: string[];
  headerExact: string[];
  headerPrefix: string[];
  /** The header names the header maps hold, lower case, sorted: the frontend looks each one up. */
  headerNames: string[];
  /** The numbers of labels of the wildcards the path maps hold, most first: the order they are looked up in. */
  wildcardLabels: number[];
}

/** The key a path part of an entry has: the Exact path, or the prefix up to its last `/`, plus `/`. */
function pathKey(e: MatchEntry): string {
  return e.path.type === "Exact" ? e.path.value : `${e.path.value.replace(/\/+$/, "")}/`;
}

function stageOf(e: MatchEntry): number {
  return e.host === null ? 2 : e.host.wildcard ? 1 : 0;
}

/** The entry's path map key, or null when it is not for a path map. */
function mapKey(e: MatchEntry, base: number | undefined): string | null {
  if (e.headers.length > 0) return null;
  return hostPathKey(e, base);
}

/** The entry's header map key, or null when it is not for a header map. */
function headerKey(e: MatchEntry, base: number | undefined): string | null {
  if (e.headers.length !== 1 || e.host?.wildcard) return null;
  const key = hostPathKey(e, base);
  return key === null ? null : headerMapKey(e.headers[0]!.name, e.headers[0]!.value, key);
}

/** `<host><path key>` (`*.<host>` for a wildcard) for an entry that matches a host and a path, and at most headers. */
function hostPathKey(e: MatchEntry, base: number | undefined): string | null {
  if (base === undefined || e.method !== null || e.queryParams.length > 0) return null;
  if (e.path.type === "PathPrefix" && e.path.value.endsWith("//")) return null;
  const host = e.host === null ? "" : `${e.host.wildcard ? "*." : ""}${e.host.name}`;
  const key = `${host}${pathKey(e)}`;
  return isGatewayMapKey(key) ? key : null;
}

/** Whether some request host matches both entries' hostnames (of one stage). */
function hostsOverlap(a: MatchEntry, b: MatchEntry): boolean {
  const x = a.host?.name;
  const y = b.host?.name;
  if (x === undefined || y === undefined || x === y) return x === y;
  // Wildcards: one covers the other's names when its labels end the other's.
  return Boolean(a.host?.wildcard) && (x.endsWith(`.${y}`) || y.endsWith(`.${x}`));
}

const headerName = (e: MatchEntry) => e.headers[0]!.name.toLowerCase();

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
  const mapped = new Map<number, { key: string; header: boolean }>();
  const linesAfter: MatchEntry[] = [];
  const headersAfter: MatchEntry[] = [];
  for (let at = f.entries.length - 1; at >= 0; at--) {
    const e = f.entries[at]!;
    const meets = (l: MatchEntry) => stageOf(l) === stageOf(e) && hostsOverlap(l, e) && pathsOverlap(e, l);
    const b = base(f.rules[e.rule]!);
    const key = mapKey(e, b);
    const hKey = key === null ? headerKey(e, b) : null;
    if (key !== null && !linesAfter.some(meets) && !headersAfter.some(meets)) mapped.set(at, { key, header: false });
    else if (
      hKey !== null &&
      !linesAfter.some(meets) &&
      !headersAfter.some((l) => headerName(l) !== headerName(e) && meets(l))
    ) {
      mapped.set(at, { key: hKey, header: true });
      headersAfter.push(e);
    } else linesAfter.push(e);
  }
  const steps: MapStep[] = [];
  const maps = {
    exact: new Map<string, number>(),
    prefix: new Map<string, number>(),
    headerExact: new Map<string, number>(),
    headerPrefix: new Map<string, number>(),
  };
  const names = new Set<string>();
  const labels = new Set<number>();
  for (const [at, m] of mapped) {
    const host = f.entries[at]!.host;
    if (!m.header && host?.wildcard) labels.add(host.name.split(".").length);
  }
  let stage = 0;
  const closeStages = (upTo: number) => {
    for (; stage < upTo; stage++)
      if (stage !== 1) steps.push({ kind: "maps", withHost: stage === 0 });
      else if (labels.size > 0) steps.push({ kind: "wildcards" });
  };
  f.entries.forEach((e, at) => {
    closeStages(stageOf(e));
    const m = mapped.get(at);
    if (m === undefined) steps.push({ kind: "line", entry: at });
    else {
      if (m.header) names.add(headerName(e));
      const exact = e.path.type === "Exact";
      const map = m.header ? (exact ? maps.headerExact : maps.headerPrefix) : exact ? maps.exact : maps.prefix;
      if (!map.has(m.key)) map.set(m.key, base(f.rules[e.rule]!)!);
    }
  });
  closeStages(3);
  const lines = (m: Map<string, number>) =>
    [...m].sort(([a], [b]) => compareStrings(a, b)).map(([key, value]) => `${key} ${value}`);
  return {
    steps,
    exact: lines(maps.exact),
    prefix: lines(maps.prefix),
    headerExact: lines(maps.headerExact),
    headerPrefix: lines(maps.headerPrefix),
    headerNames: [...names].sort(compareStrings),
    wildcardLabels: [...labels].sort((a, b) => b - a),
  };
}
