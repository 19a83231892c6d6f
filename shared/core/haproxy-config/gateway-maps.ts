/*
 * The match maps of a Gateway API frontend (core/gateway/map-plan.ts), which the agent changes
 * through the runtime API (pattern-files.ts, `prepare map` … `commit map`): a simple route added,
 * removed or pointed elsewhere changes their lines and the weights map's, not the config's.
 *
 * Four maps per listener port, looked up with the request's host and path joined (the host is
 * left out for the entries of routes without hostnames; a key with a host never starts with `/`;
 * a wildcard's key starts with `*.` and its labels, looked up with as many of the host's last labels),
 * and for a match on one header, that header's name and last value before them:
 *   maps/gw.<port>.exact.map          <host><path> → rule          (map_str: an Exact path)
 *   maps/gw.<port>.prefix.map         <host><prefix>/ → rule       (map_beg: a PathPrefix, the longest wins)
 *   maps/gw.<port>.header-exact.map   <name>=<value>|<host><path> → rule
 *   maps/gw.<port>.header-prefix.map  <name>=<value>|<host><prefix>/ → rule
 * A header value in a key holds none of `|` and spaces, and the frontend looks a request's value
 * up only when it has the same grammar, so no value can reach into the host and path of a key.
 * The rule is its number in the weights map times DRAW_RANGE (gateway-weights.ts): the base its
 * draw is added to.
 *
 * Pure, and every key and value is checked against its grammar both ways: nothing unvalidated
 * reaches a file or a runtime command.
 */

import { ROUTE_MAP_DIR } from "./route-maps.js";

export type GatewayMapKind = "exact" | "prefix" | "header-exact" | "header-prefix";

const PATH = new RegExp(`^${ROUTE_MAP_DIR}/gw\\.([1-9][0-9]{0,4})\\.(exact|prefix|header-exact|header-prefix)\\.map$`);

export function gatewayMapPath(port: number, kind: GatewayMapKind): string {
  return `${ROUTE_MAP_DIR}/gw.${port}.${kind}.map`;
}

export function isGatewayMapPath(path: string): boolean {
  const m = PATH.exec(path);
  return m !== null && Number(m[1]) <= 65535;
}

const LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
/**
 * Path characters a key may hold: those of the API's paths (core/gateway/rules.ts) that neither
 * HAProxy's map files nor its command line read as anything but themselves.
 */
const PATH_CHARS = "([A-Za-z0-9._~:@+=,/-]|%[0-9A-Fa-f]{2})*";
const KEY = new RegExp(`^((\\*\\.)?${LABEL}(\\.${LABEL})*)?/${PATH_CHARS}$`);
const VALUE = /^[0-9]{1,15}$/;
/** A header name as a key holds it (lower case: names match whatever their case). */
const HEADER_NAME = /^[a-z0-9-]{1,64}$/;
/** The header values a key may hold, as a regex the frontend also tests the request's value with. */
export const HEADER_VALUE_PATTERN = "^[A-Za-z0-9._~+=,@-]{1,128}$";
const HEADER_VALUE = new RegExp(HEADER_VALUE_PATTERN);

/** Whether `key` (a host or nothing, then a path) can be a key of a Gateway match map. */
export function isGatewayMapKey(key: string): boolean {
  return key.length <= 2048 && KEY.test(key);
}

/** The key of a match on one header (`name`, any case) and `hostPath` (a match map key), or null when one cannot hold it. */
export function headerMapKey(name: string, value: string, hostPath: string): string | null {
  const lower = name.toLowerCase();
  if (!HEADER_NAME.test(lower) || !HEADER_VALUE.test(value) || !isGatewayMapKey(hostPath)) return null;
  return `${lower}=${value}|${hostPath}`;
}

function isHeaderMapKey(key: string): boolean {
  const bar = key.indexOf("|");
  const eq = key.indexOf("=");
  if (bar < 0 || eq < 0 || eq > bar) return false;
  const name = key.slice(0, eq);
  return HEADER_NAME.test(name) && headerMapKey(name, key.slice(eq + 1, bar), key.slice(bar + 1)) === key;
}

/** Why `line` cannot be a line of the map at `path` (a Gateway match map), or null when it can. */
export function gatewayMapLineError(path: string, line: string): string | null {
  const space = line.indexOf(" ");
  if (space < 0) return "is not <key> <rule>";
  const key = line.slice(0, space);
  if (path.includes(".header-")) {
    if (!isHeaderMapKey(key)) return `key ${JSON.stringify(key.slice(0, 60))} is not a header, a host and a path`;
  } else if (!isGatewayMapKey(key)) return `key ${JSON.stringify(key.slice(0, 60))} is not a host and a path`;
  if (path.endsWith("prefix.map") && !key.endsWith("/")) return "is a prefix key without its final /";
  return VALUE.test(line.slice(space + 1)) ? null : "value is not a rule's number";
}
