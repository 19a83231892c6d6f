/*
 * Listener ↔ HTTPRoute hostname intersection, as apis/v1/httproute_types.go (Hostnames) defines
 * it: a `*.` wildcard matches every name under its domain (any depth) but not the domain itself;
 * where a listener and a route both name hosts, the route serves the names both allow, each the
 * more specific of the pair.
 */

import type { HostMatch } from "../model/host-match.js";

/** A hostname as written (`*.example.com`, `api.example.com`), lower-cased. */
export function hostMatchOf(hostname: string): HostMatch {
  const v = hostname.toLowerCase();
  return v.startsWith("*.") ? { name: v.slice(2), wildcard: true } : { name: v, wildcard: false };
}

/** Whether `host` (exact or wildcard) lies within `pattern`: every name it matches, `pattern` matches. */
function within(host: HostMatch, pattern: HostMatch): boolean {
  if (!pattern.wildcard) return !host.wildcard && host.name === pattern.name;
  return host.name.endsWith(`.${pattern.name}`) || (host.wildcard && host.name === pattern.name);
}

/** The names both allow, as one pattern (the more specific of the two), or null when they share none. */
export function intersectHost(a: HostMatch, b: HostMatch): HostMatch | null {
  if (within(a, b)) return a;
  if (within(b, a)) return b;
  return null;
}

/**
 * The hostnames a route serves on a listener: null means any host (neither names one); an empty
 * array means they share no name, and the route does not attach to that listener.
 */
export function effectiveHostnames(listener: string | null, route: readonly string[]): HostMatch[] | null {
  if (listener === null && route.length === 0) return null;
  if (listener === null) return dedupe(route.map(hostMatchOf));
  const l = hostMatchOf(listener);
  if (route.length === 0) return [l];
  const out: HostMatch[] = [];
  for (const r of route) {
    const both = intersectHost(hostMatchOf(r), l);
    if (both) out.push(both);
  }
  return dedupe(out);
}

function dedupe(hosts: HostMatch[]): HostMatch[] {
  const seen = new Set<string>();
  return hosts.filter((h) => {
    const key = `${h.wildcard ? "*." : ""}${h.name}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Whether a request for `host` (exact, lower-case) is served by `pattern`. */
export function hostMatches(pattern: HostMatch, host: string): boolean {
  return pattern.wildcard ? host.endsWith(`.${pattern.name}`) : host === pattern.name;
}
