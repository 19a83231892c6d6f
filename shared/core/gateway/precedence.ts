/*
 * The order in which a frontend tries its match entries: the first that a request satisfies
 * wins, so this order is the spec's precedence (apis/v1/httproute_types.go, HTTPRouteSpec.Hostnames
 * and HTTPRouteRule.Matches):
 *   1. the hostname: an exact name, then wildcards with the most characters, then any host;
 *   2. an Exact path, then the PathPrefix with the most characters;
 *   3. a method match; 4. the most header matches; 5. the most query parameter matches;
 *   6. the oldest route (creationTimestamp); 7. `namespace/name` alphabetically;
 *   8. the rule's position in its route, then the match's.
 * Two hosts of the same kind and length never match the same request (two exact names, or
 * two domains of one length under which a name lies), so they are ordered by name right after
 * their length: the entries of one host stay together, and the order is total, so the config is
 * the same whatever order the objects were listed in.
 */

import { compareStrings } from "../compare.js";
import type { MatchEntry } from "./routing.js";

function hostRank(e: MatchEntry): number {
  return e.host === null ? 2 : e.host.wildcard ? 1 : 0;
}

export function comparePrecedence(a: MatchEntry, b: MatchEntry): number {
  return (
    hostRank(a) - hostRank(b) ||
    (b.host?.name.length ?? 0) - (a.host?.name.length ?? 0) ||
    compareStrings(a.host?.name ?? "", b.host?.name ?? "") ||
    (a.path.type === "Exact" ? 0 : 1) - (b.path.type === "Exact" ? 0 : 1) ||
    b.path.value.length - a.path.value.length ||
    (a.method === null ? 1 : 0) - (b.method === null ? 1 : 0) ||
    b.headers.length - a.headers.length ||
    b.queryParams.length - a.queryParams.length ||
    compareCreated(a.created, b.created) ||
    compareStrings(a.route, b.route) ||
    a.ruleIndex - b.ruleIndex ||
    a.matchIndex - b.matchIndex ||
    compareStrings(a.path.value, b.path.value)
  );
}

function compareCreated(a: number, b: number): number {
  if (a === b) return 0;
  return a < b ? -1 : 1;
}
