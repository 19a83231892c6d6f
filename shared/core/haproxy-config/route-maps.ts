/*
 * The HTTP frontend's routes as HAProxy maps, which the agent changes through the runtime API
 * (`prepare map` … `commit map`) without a reload: a Service added into a spare backend, or
 * removed, changes map lines and server slots only.
 *
 * Three maps, looked up in this order, the first hit wins (ROUTE_LOOKUP):
 *   maps/http.hosts.map    exact host → route       (map_str: a tree, any size)
 *   maps/http.domains.map  .domain → route          (map_end: HAProxy takes the first line that
 *                                                      matches, so the longest domain comes first)
 *   maps/http.paths.map    prefix/ → route          (map_beg: a prefix tree, the longest wins)
 * A path prefix is stored with a trailing slash and looked up as `<path>/`, so `/foo` catches
 * `/foo` and `/foo/…` but never `/foobar`, as the rule lines did; `/` is stored as itself.
 *
 * A route is a backend name, with `|1` or `|2` when the backend is a spare that must strip the
 * first one or two path segments (a Service's own path, `/<name>` or `/<namespace>/<name>`):
 * a spare does not know at render time which Service it will hold (see backend-layout.ts).
 * Pure, and every key and value is checked against its grammar both ways: nothing unvalidated
 * reaches a file or a runtime command.
 */

import { compareStrings } from "../compare.js";
import { describeValue } from "../describe-value.js";
import type { HttpRoute } from "../model/model.js";

export const ROUTE_MAP_DIR = "maps";
export const HOSTS_MAP = `${ROUTE_MAP_DIR}/http.hosts.map`;
export const DOMAINS_MAP = `${ROUTE_MAP_DIR}/http.domains.map`;
export const PATHS_MAP = `${ROUTE_MAP_DIR}/http.paths.map`;
export const ROUTE_MAPS = [HOSTS_MAP, DOMAINS_MAP, PATHS_MAP] as const;
export type RouteMapPath = (typeof ROUTE_MAPS)[number];

/**
 * The HTTP frontend's routing lines (the main template's `http_route_maps`). `txn.strip` tells a
 * spare how many leading path segments to remove; every other backend strips with its own rule.
 */
export const ROUTE_LOOKUP = `    # Routes live in maps the agent changes without a reload: the exact host, then the longest
    # *.domain, then the longest path prefix on a segment boundary.
    http-request set-var(txn.route) var(txn.host),map_str(${HOSTS_MAP})
    http-request set-var(txn.route) var(txn.host),map_end(${DOMAINS_MAP}) unless { var(txn.route) -m found }
    http-request set-var(txn.route) path,concat(/),map_beg(${PATHS_MAP}) unless { var(txn.route) -m found }
    http-request set-var(txn.strip) var(txn.route),field(2,|) if { var(txn.route),field(2,|) -m len gt 0 }
    use_backend %[var(txn.route),field(1,|)] if { var(txn.route) -m found }
`;

const LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
const HOST_KEY = new RegExp(`^${LABEL}(\\.${LABEL})*$`);
const DOMAIN_KEY = new RegExp(`^(\\.${LABEL})+$`);
// annotations.ts's path prefix grammar, with the trailing slash every key has.
const PATH_KEY = /^\/(([A-Za-z0-9._~:@+=,-]|%[0-9A-Fa-f]{2})+\/)*$/;
/** Backend names: Kubernetes names and ports joined by `_` (service-plan.ts), spares, redirects. */
const VALUE = /^[a-z0-9][a-z0-9_.-]{0,300}(\|[12])?$/;

export interface MapEntry {
  key: string;
  value: string;
}

export function isRouteMapPath(path: string): path is RouteMapPath {
  return (ROUTE_MAPS as readonly string[]).includes(path);
}

/** One map line, `<key> <value>`, checked against its map's grammar; an error text otherwise. */
export function parseMapLine(path: RouteMapPath, line: string): MapEntry | string {
  const space = line.indexOf(" ");
  if (space < 0) return "is not <key> <value>";
  const key = line.slice(0, space);
  const value = line.slice(space + 1);
  const keyOk = path === HOSTS_MAP ? HOST_KEY : path === DOMAINS_MAP ? DOMAIN_KEY : PATH_KEY;
  if (key.length > 300 || !keyOk.test(key)) return `key ${describeValue(key, 60)} does not fit ${path}`;
  if (!VALUE.test(value)) return `value ${describeValue(value, 60)} is not a backend name`;
  return { key, value };
}

function routeValue(r: HttpRoute, redirect: (r: HttpRoute) => string): string {
  const backend = r.action === "https-redirect" ? redirect(r) : r.backend;
  return r.stripSegments ? `${backend}|${r.stripSegments}` : backend;
}

/**
 * The three maps' lines for the HTTP frontend's routes, in the order the agent loads them:
 * hosts and paths sorted by key (their lookups do not depend on order), domains longest first.
 */
export function routeMapLines(
  routes: readonly HttpRoute[],
  redirect: (r: HttpRoute) => string,
): Map<RouteMapPath, string[]> {
  const hosts: MapEntry[] = [];
  const domains: MapEntry[] = [];
  const paths: MapEntry[] = [];
  for (const r of routes) {
    const value = routeValue(r, redirect);
    if (r.match.kind === "host") {
      if (r.match.host.wildcard) domains.push({ key: `.${r.match.host.name}`, value });
      else hosts.push({ key: r.match.host.name, value });
    } else {
      const p = r.match.prefix;
      paths.push({ key: p === "/" ? "/" : `${p}/`, value });
    }
  }
  const byKey = (a: MapEntry, b: MapEntry) => compareStrings(a.key, b.key);
  hosts.sort(byKey);
  paths.sort(byKey);
  domains.sort((a, b) => b.key.length - a.key.length || compareStrings(a.key, b.key));
  const lines = (entries: MapEntry[]) => entries.map((e) => `${e.key} ${e.value}`);
  return new Map<RouteMapPath, string[]>([
    [HOSTS_MAP, lines(hosts)],
    [DOMAINS_MAP, lines(domains)],
    [PATHS_MAP, lines(paths)],
  ]);
}
