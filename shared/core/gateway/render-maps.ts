/*
 * Gateway API frontends when the template routes by maps: the lines stay the same while simple
 * routes come, go and change, which the agent then applies through the runtime API.
 *
 * Every rule without filters draws its backend in the weights map (haproxy-config/gateway-weights.ts),
 * a single backendRef too, so that pointing it elsewhere is a change of that map's lines. Its
 * match entries live in the frontend's match maps (haproxy-config/gateway-maps.ts) where
 * map-plan.ts finds that sound, and a match records the rule's base there in `txn.gwbase`. A rule
 * with filters keeps its lines (render.ts ruleLines), numbered among those rules in `txn.gw`, and
 * draws in the weights map when it has more than one backendRef. Line entries' ACLs are named by
 * their place among the line entries, so that entries moving in the maps do not rename them.
 */

import { haproxyQuote } from "../render/haproxy-quote.js";
import { gatewayMapPath, HEADER_VALUE_PATTERN } from "../haproxy-config/gateway-maps.js";
import { DRAW_RANGE, drawIds, WEIGHTS_MAP, weightMapLines } from "../haproxy-config/gateway-weights.js";
import { type FrontendMaps, planFrontendMaps } from "./map-plan.js";
import { conditions, type FrontendText, INVALID_BACKEND, ruleLines } from "./render.js";
import type { GatewayFrontend, GatewayRouting, ResolvedRule } from "./routing.js";

/** What the frontends of a routing look up: the rules' numbers in the weights map, each frontend's maps, and the files. */
export interface GatewayMaps {
  ids: ReadonlyMap<ResolvedRule, number>;
  frontends: ReadonlyMap<GatewayFrontend, FrontendMaps>;
  /** The weights map and the match maps of every frontend, by path; none without frontends. */
  files: Array<{ path: string; entries: string[] }>;
}

/** A rule that matches and picks a backend, with nothing to do to the request or response. */
function withoutFilters(rule: ResolvedRule): boolean {
  return (
    rule.redirect === null && rule.rewrite === null && rule.requestHeaders === null && rule.responseHeaders === null
  );
}

/** The rule's base in the weights map when it draws there without filters (planFrontendMaps's `base`). */
function baseOf(ids: ReadonlyMap<ResolvedRule, number>, rule: ResolvedRule): number | undefined {
  const id = ids.get(rule);
  return id !== undefined && withoutFilters(rule) ? id * DRAW_RANGE : undefined;
}

export function gatewayMaps(routing: GatewayRouting): GatewayMaps {
  const keyed = new Map<string, ResolvedRule>();
  for (const f of routing.frontends)
    for (const rule of f.rules)
      if (withoutFilters(rule) || (rule.redirect === null && rule.picks.length > 1))
        keyed.set(`${f.port}/${rule.route}#${rule.ruleIndex}`, rule);
  const numbers = drawIds([...keyed.keys()]);
  const ids = new Map<ResolvedRule, number>();
  for (const [key, rule] of keyed) ids.set(rule, numbers.get(key)!);
  const frontends = new Map<GatewayFrontend, FrontendMaps>();
  const files: GatewayMaps["files"] = [];
  if (routing.frontends.length > 0)
    files.push({
      path: WEIGHTS_MAP,
      entries: weightMapLines(
        [...ids].map(([rule, id]) => ({ id, picks: rule.picks })),
        INVALID_BACKEND,
      ),
    });
  for (const f of routing.frontends) {
    const maps = planFrontendMaps(f, (rule) => baseOf(ids, rule));
    frontends.set(f, maps);
    files.push({ path: gatewayMapPath(f.port, "exact"), entries: maps.exact });
    files.push({ path: gatewayMapPath(f.port, "prefix"), entries: maps.prefix });
    files.push({ path: gatewayMapPath(f.port, "header-exact"), entries: maps.headerExact });
    files.push({ path: gatewayMapPath(f.port, "header-prefix"), entries: maps.headerPrefix });
  }
  return { ids, frontends, files };
}

/** No rule picked yet: none with filters, none without. */
const UNMATCHED = "!{ var(txn.gw) -m found } !{ var(txn.gwbase) -m found }";
/**
 * A host a map key can start with: keys join a host and a path (HAProxy's `path` starts with
 * `/` when it is found), and a host without `/` ends where the path starts, so that a key
 * matches one host only; an empty one would reach the entries without hostnames out of turn.
 */
const MAP_HOST = `{ var(txn.host) -m reg ${haproxyQuote("^[a-z0-9.-]+$")} }`;

/**
 * The header maps' lookups of a stage, a header name at a time: its last value (as a line's
 * `req.fhdr(<name>,-1)` compares it), when it has the keys' grammar, before the host and path.
 */
function headerLookupLines(port: number, withHost: boolean, names: readonly string[]): string[] {
  const exact = gatewayMapPath(port, "header-exact");
  const prefix = gatewayMapPath(port, "header-prefix");
  const host = withHost ? `concat(,txn.host,)` : "";
  // The value's condition first: a request without the header stops there, before the host's regex.
  const when = `{ var(txn.gwhv) -m found } ${UNMATCHED}${withHost ? ` ${MAP_HOST}` : ""}`;
  return names.flatMap((name) => [
    "    http-request unset-var(txn.gwhv)",
    `    http-request set-var(txn.gwhv) req.fhdr(${name},-1) if { req.fhdr(${name},-1) -m found } ${UNMATCHED} { req.fhdr(${name},-1) -m reg ${haproxyQuote(HEADER_VALUE_PATTERN)} }`,
    `    http-request set-var(txn.gwbase) str(${name}=),concat(,txn.gwhv,|),${host ? `${host},` : ""}concat(,txn.gwpath,),map_str_int(${exact}) if ${when}`,
    `    http-request set-var(txn.gwbase) str(${name}=),concat(,txn.gwhv,|),${host ? `${host},` : ""}concat(,txn.gwpath,/),map_beg_int(${prefix}) if ${when}`,
  ]);
}

function lookupLines(port: number, withHost: boolean, names: readonly string[]): string[] {
  const exact = gatewayMapPath(port, "exact");
  const prefix = gatewayMapPath(port, "prefix");
  const headers = headerLookupLines(port, withHost, names);
  if (withHost)
    return [
      ...headers,
      `    http-request set-var(txn.gwbase) var(txn.host),concat(,txn.gwpath,),map_str_int(${exact}) if ${UNMATCHED} ${MAP_HOST}`,
      `    http-request set-var(txn.gwbase) var(txn.host),concat(,txn.gwpath,/),map_beg_int(${prefix}) if ${UNMATCHED} ${MAP_HOST}`,
    ];
  // A request without a path (`*`) is matched by a prefix `/` alone, as its line would match it;
  // with a host, the missing `txn.gwpath` adds nothing to the key, which leaves `<host>/` to match.
  // So with a header: its key ends in `|`, to which the prefix lookup adds the `/`.
  return [
    ...headers,
    `    http-request set-var(txn.gwbase) path,map_str_int(${exact}) if ${UNMATCHED}`,
    `    http-request set-var(txn.gwbase) path,concat(/),map_beg_int(${prefix}) if ${UNMATCHED}`,
    `    http-request set-var(txn.gwbase) str(/),map_beg_int(${prefix}) if ${UNMATCHED} !{ path -m found }`,
  ];
}

/**
 * The wildcards' lookups: for each number of labels, most first, the host's last labels as
 * `*.<labels>`, when the host is longer than them (a label and its dot before: a wildcard never
 * matches its own name) and holds no `/` (that would reach into a key's path).
 */
function wildcardLookupLines(port: number, labels: readonly number[]): string[] {
  const exact = gatewayMapPath(port, "exact");
  const prefix = gatewayMapPath(port, "prefix");
  const when = `${UNMATCHED} { var(txn.host) -m found } !{ var(txn.host) -m sub / } { var(txn.host),length,sub(txn.gwsl) -m int gt 0 }`;
  return labels.flatMap((n) => [
    `    http-request set-var(txn.gws) var(txn.host),field(-1,.,${n}) if ${UNMATCHED}`,
    `    http-request set-var(txn.gwsl) var(txn.gws),length if ${UNMATCHED}`,
    `    http-request set-var(txn.gwbase) str(*.),concat(,txn.gws,),concat(,txn.gwpath,),map_str_int(${exact}) if ${when}`,
    `    http-request set-var(txn.gwbase) str(*.),concat(,txn.gws,),concat(,txn.gwpath,/),map_beg_int(${prefix}) if ${when}`,
  ]);
}

/** A frontend's Gateway lines with its simple entries in its maps (`maps`: gatewayMaps of its routing). */
export function mapFrontendLines(f: GatewayFrontend, maps: GatewayMaps): FrontendText {
  const plan = maps.frontends.get(f)!;
  const filtered = new Map<ResolvedRule, number>();
  for (const rule of f.rules) if (baseOf(maps.ids, rule) === undefined) filtered.set(rule, filtered.size);
  const req: string[] = [
    "    # Gateway API routes, in the spec's precedence order: the first match picks the rule, one with",
    "    # filters by its number among them (txn.gw), any other by its base in the weights map",
    `    # (txn.gwbase). Matches on a host and a path (and one header) live in ${gatewayMapPath(f.port, "exact")} and the like.`,
    "    http-request set-var(txn.gwpath) path",
  ];
  let named = 0;
  for (const step of plan.steps) {
    if (step.kind === "maps") {
      req.push(...lookupLines(f.port, step.withHost, plan.headerNames));
      continue;
    }
    if (step.kind === "wildcards") {
      req.push(...wildcardLookupLines(f.port, plan.wildcardLabels));
      continue;
    }
    const e = f.entries[step.entry]!;
    const rule = f.rules[e.rule]!;
    const acls: string[] = [];
    const c = conditions(e, named++, acls);
    const base = baseOf(maps.ids, rule);
    const set = base !== undefined ? `set-var(txn.gwbase) int(${base})` : `set-var(txn.gw) int(${filtered.get(rule)})`;
    req.push(...acls, `    http-request ${set} if ${UNMATCHED}${c.length > 0 ? ` ${c.join(" ")}` : ""}`);
  }
  const uses: string[] = [];
  for (const [rule, i] of filtered) ruleLines(rule, i, maps.ids.get(rule), req, uses);
  req.push(
    `    http-request set-var(txn.gwbackend) rand(${DRAW_RANGE}),add(txn.gwbase),map_int(${WEIGHTS_MAP},${INVALID_BACKEND}) if { var(txn.gwbase) -m found }`,
  );
  uses.push("    use_backend %[var(txn.gwbackend)] if { var(txn.gwbase) -m found }");
  return { requests: `${req.join("\n")}\n`, uses: `${uses.join("\n")}\n` };
}
