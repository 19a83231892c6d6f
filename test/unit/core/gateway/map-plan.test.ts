import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type FrontendMaps, planFrontendMaps } from "../../../../shared/core/gateway/map-plan.js";
import { comparePrecedence } from "../../../../shared/core/gateway/precedence.js";
import type { GatewayFrontend, MatchEntry, ResolvedRule } from "../../../../shared/core/gateway/routing.js";
import {
  gatewayMapLineError,
  gatewayMapPath,
  HEADER_VALUE_PATTERN,
} from "../../../../shared/core/haproxy-config/gateway-maps.js";
import { DRAW_RANGE } from "../../../../shared/core/haproxy-config/gateway-weights.js";

interface Request {
  host: string | null;
  /** HAProxy's `path`: absent for `*` (http_get_path), else it starts with `/`. */
  path: string | null;
  method: string;
  headers: Record<string, string>;
}

/** Whether the entry's line (render.ts conditions) matches the request. */
function lineMatches(e: MatchEntry, r: Request): boolean {
  if (e.host) {
    if (r.host === null) return false;
    if (e.host.wildcard ? !r.host.endsWith(`.${e.host.name}`) : r.host !== e.host.name) return false;
  }
  if (e.path.type === "Exact") {
    if (r.path !== e.path.value) return false;
  } else {
    const trimmed = e.path.value.replace(/\/+$/, "");
    if (trimmed !== "" && (r.path === null || !`${r.path}/`.startsWith(`${trimmed}/`))) return false;
  }
  if (e.method !== null && r.method !== e.method) return false;
  return e.headers.every((h) => r.headers[h.name.toLowerCase()] === h.value);
}

/** The frontend's header lookups (render-maps.ts): each name's value, when it has the keys' grammar. */
function viaHeaderMaps(plan: FrontendMaps, r: Request, hostPart: string): number | undefined {
  for (const name of plan.headerNames) {
    const value = r.headers[name];
    if (value === undefined || !new RegExp(HEADER_VALUE_PATTERN).test(value)) continue;
    const key = `${name}=${value}|${hostPart}`;
    const hit =
      lookUp(plan.headerExact, key + (r.path ?? ""), false) ??
      lookUp(plan.headerPrefix, `${key}${r.path ?? ""}/`, true);
    if (hit !== undefined) return hit;
  }
  return undefined;
}

/** map_str_int: an equal key; map_beg_int: the longest key the sample begins with. */
function lookUp(lines: readonly string[], sample: string, prefix: boolean): number | undefined {
  let best: { key: string; value: number } | undefined;
  for (const line of lines) {
    const [key, value] = line.split(" ") as [string, string];
    if (prefix ? sample.startsWith(key) && key.length > (best?.key.length ?? -1) : sample === key)
      best = { key, value: Number(value) };
  }
  return best?.value;
}

/** What the map-based lines (render-maps.ts) pick: a rule's base, or a rule with filters by its index. */
function viaMaps(f: GatewayFrontend, plan: FrontendMaps, base: (rule: number) => number | undefined, r: Request) {
  for (const step of plan.steps) {
    if (step.kind === "line") {
      const e = f.entries[step.entry]!;
      if (lineMatches(e, r)) return base(e.rule) ?? `rule ${e.rule}`;
      continue;
    }
    if (step.kind === "wildcards") {
      // field(-1,.,n): the host's last n labels (all of them when it has fewer).
      if (r.host === null || r.host.includes("/")) continue;
      for (const n of plan.wildcardLabels) {
        const labels = r.host.split(".").slice(-n).join(".");
        if (r.host.length <= labels.length) continue;
        const key = `*.${labels}${r.path ?? ""}`;
        const hit = lookUp(plan.exact, key, false) ?? lookUp(plan.prefix, `${key}/`, true);
        if (hit !== undefined) return hit;
      }
      continue;
    }
    let hit: number | undefined;
    if (step.withHost) {
      // A missing txn.gwpath adds nothing to the key (concat).
      if (r.host === null || !/^[a-z0-9.-]+$/.test(r.host)) continue;
      hit =
        viaHeaderMaps(plan, r, r.host) ??
        lookUp(plan.exact, r.host + (r.path ?? ""), false) ??
        lookUp(plan.prefix, `${r.host}${r.path ?? ""}/`, true);
    } else {
      hit = viaHeaderMaps(plan, r, "");
      if (hit === undefined && r.path !== null)
        hit = lookUp(plan.exact, r.path, false) ?? lookUp(plan.prefix, `${r.path}/`, true);
      else if (hit === undefined) hit = lookUp(plan.prefix, "/", true);
    }
    if (hit !== undefined) return hit;
  }
  return "none";
}

/** What the spec's precedence picks: the first entry in order that matches. */
function viaLines(f: GatewayFrontend, base: (rule: number) => number | undefined, r: Request) {
  const e = f.entries.find((x) => lineMatches(x, r));
  return e === undefined ? "none" : (base(e.rule) ?? `rule ${e.rule}`);
}

const HOSTS = ["a.ex", "b.ex", "x.a.ex", "y.x.a.ex"];
const PATHS = ["/", "/a", "/a/", "/a/b", "/ab", "/b", "/a/b/c"];

const arbEntry = fc.record({
  host: fc.oneof(
    fc.constant(null),
    fc.record({ name: fc.constantFrom(...HOSTS), wildcard: fc.constant(false) }),
    fc.record({ name: fc.constantFrom("ex", "a.ex", "x.a.ex"), wildcard: fc.constant(true) }),
  ),
  path: fc.record({ type: fc.constantFrom("Exact" as const, "PathPrefix" as const), value: fc.constantFrom(...PATHS) }),
  method: fc.constantFrom(null, null, null, "POST"),
  headers: fc.constantFrom(
    [],
    [],
    [],
    [{ name: "v", value: "2" }],
    [{ name: "V", value: "3" }],
    [{ name: "w", value: "2" }],
    [{ name: "v", value: "two words" }],
    [
      { name: "v", value: "2" },
      { name: "w", value: "2" },
    ],
  ),
  queryParams: fc.constant([]),
  created: fc.constantFrom(0, 1000, 2000),
  route: fc.constantFrom("a/r1", "a/r2", "b/r1"),
  ruleIndex: fc.nat(2),
  matchIndex: fc.nat(2),
});

const arbRequest = fc.record({
  host: fc.constantFrom(null, "", "A.ex", "a.ex/b", "z.ex", "q.x.a.ex", ...HOSTS),
  path: fc.constantFrom(null, "/a/bc", "/c", "/a//", ...PATHS),
  method: fc.constantFrom("GET", "POST"),
  headers: fc.constantFrom<Record<string, string>>(
    {},
    { v: "2" },
    { v: "3" },
    { w: "2" },
    { v: "2", w: "2" },
    { v: "3", w: "2" },
    { v: "two words" },
    { v: "2|a.ex/a" },
  ),
});

/** A frontend of the entries in precedence order, a rule per (route, rule index); `filtered`: the rules with filters. */
function frontendOf(raw: Omit<MatchEntry, "rule">[], filtered: ReadonlySet<string>) {
  const rules: ResolvedRule[] = [];
  const ruleAt = new Map<string, number>();
  const entries = new Map<string, MatchEntry>();
  for (const e of raw) {
    const id = `${e.route}#${e.ruleIndex}`;
    if (!ruleAt.has(id)) {
      ruleAt.set(id, rules.length);
      const edits = filtered.has(id) ? { set: [{ name: "x", value: "y" }], add: [], remove: [] } : null;
      rules.push({
        route: e.route,
        ruleIndex: e.ruleIndex,
        requestHeaders: edits,
        responseHeaders: null,
        rewrite: null,
        redirect: null,
        picks: [],
      });
    }
    const host = e.host === null ? "" : `${e.host.wildcard ? "*." : ""}${e.host.name}`;
    entries.set(`${host} ${id}.${e.matchIndex}`, { ...e, rule: ruleAt.get(id)! });
  }
  const f: GatewayFrontend = {
    port: 8081,
    shared: false,
    certificates: [],
    entries: [...entries.values()].sort(comparePrecedence),
    rules,
  };
  const base = (rule: number) => (rules[rule]!.requestHeaders === null ? rule * DRAW_RANGE : undefined);
  return { f, base };
}

/** The `i`th route's only match: a host, a path and headers as given, nothing else. */
function entryOf(
  m: { host: MatchEntry["host"]; path: { type: string; value: string }; headers: MatchEntry["headers"] },
  i: number,
): Omit<MatchEntry, "rule"> {
  const path = m.path as MatchEntry["path"];
  return { ...m, path, method: null, queryParams: [], created: 0, route: `a/r${i}`, ruleIndex: 0, matchIndex: 0 };
}

describe("planFrontendMaps", () => {
  it("routes every request as the entries' lines in precedence order do (property)", () => {
    fc.assert(
      fc.property(
        fc.array(arbEntry, { maxLength: 14 }),
        fc.subarray(["a/r1#0", "a/r2#1", "b/r1#2"]),
        fc.array(arbRequest, { minLength: 20, maxLength: 20 }),
        (raw, filtered, requests) => {
          const { f, base } = frontendOf(raw, new Set(filtered));
          const plan = planFrontendMaps(f, (rule) => base(f.rules.indexOf(rule)));
          for (const line of plan.exact) expect(gatewayMapLineError(gatewayMapPath(8081, "exact"), line)).toBeNull();
          for (const line of plan.prefix) expect(gatewayMapLineError(gatewayMapPath(8081, "prefix"), line)).toBeNull();
          for (const line of plan.headerExact)
            expect(gatewayMapLineError(gatewayMapPath(8081, "header-exact"), line)).toBeNull();
          for (const line of plan.headerPrefix)
            expect(gatewayMapLineError(gatewayMapPath(8081, "header-prefix"), line)).toBeNull();
          for (const r of requests) expect(viaMaps(f, plan, base, r)).toEqual(viaLines(f, base, r));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("puts the entries of simple routes in the maps, and keeps the lookups' lines whatever they hold", () => {
    const { f, base } = frontendOf(
      [
        { host: { name: "a.ex", wildcard: false }, path: { type: "PathPrefix", value: "/" } },
        { host: { name: "a.ex", wildcard: false }, path: { type: "Exact", value: "/a" } },
        { host: null, path: { type: "PathPrefix", value: "/b" } },
      ].map((m, i) => entryOf({ headers: [], ...m }, i)),
      new Set(),
    );
    const plan = planFrontendMaps(f, (rule) => base(f.rules.indexOf(rule)));
    expect(plan.steps).toEqual([
      { kind: "maps", withHost: true },
      { kind: "maps", withHost: false },
    ]);
    expect(plan.exact).toEqual([`a.ex/a ${DRAW_RANGE}`]);
    expect(plan.prefix).toEqual(["/b/ 2097152", "a.ex/ 0"]);
  });

  it("keeps a line for a simple entry that a later line entry of its stage may also match", () => {
    const { f, base } = frontendOf(
      [
        { path: { type: "PathPrefix", value: "/a/b" }, headers: [] },
        {
          path: { type: "PathPrefix", value: "/a" },
          headers: [
            { name: "v", value: "2" },
            { name: "w", value: "2" },
          ],
        },
        { path: { type: "Exact", value: "/c" }, headers: [] },
      ].map((m, i) => entryOf({ host: null, ...m }, i)),
      new Set(),
    );
    const plan = planFrontendMaps(f, (rule) => base(f.rules.indexOf(rule)));
    const lineRoutes = plan.steps.flatMap((s) => (s.kind === "line" ? [f.entries[s.entry]!.route] : []));
    expect(lineRoutes).toEqual(["a/r0", "a/r1"]);
    expect(plan.exact).toEqual([`/c ${2 * DRAW_RANGE}`]);
  });

  it("puts a match on a path and one header in the header maps, and keeps a line for what a later one may steal", () => {
    const { f, base } = frontendOf(
      [
        { host: { name: "a.ex", wildcard: false }, path: { type: "Exact", value: "/a/b" }, headers: [] },
        {
          host: { name: "a.ex", wildcard: false },
          path: { type: "PathPrefix", value: "/a" },
          headers: [{ name: "Version", value: "2" }],
        },
        { host: null, path: { type: "PathPrefix", value: "/" }, headers: [{ name: "w", value: "x" }] },
        { host: null, path: { type: "PathPrefix", value: "/" }, headers: [] },
      ].map((m, i) => entryOf(m, i)),
      new Set(),
    );
    const plan = planFrontendMaps(f, (rule) => base(f.rules.indexOf(rule)));
    // The Exact /a/b comes first, and the header lookups come before the path maps: it keeps a line.
    expect(plan.steps).toEqual([
      { kind: "line", entry: 0 },
      { kind: "maps", withHost: true },
      { kind: "maps", withHost: false },
    ]);
    expect(plan.headerNames).toEqual(["version", "w"]);
    expect(plan.headerPrefix).toEqual([`version=2|a.ex/a/ ${DRAW_RANGE}`, `w=x|/ ${2 * DRAW_RANGE}`]);
    expect(plan.prefix).toEqual([`/ ${3 * DRAW_RANGE}`]);
    expect(plan.exact).toEqual([]);
  });
});
