/*
 * Host names as servicelb matches them: `lb.host` values and `--host-claims` patterns share one
 * grammar (RFC 1123 names, optionally `*.` for every name under a domain).
 */

import { describeValue } from "./describe-value.js";

export interface HostMatch {
  /** Lower-case host name, or the domain after `*.` for a wildcard. */
  name: string;
  wildcard: boolean;
}

const LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
const HOST = new RegExp(`^(\\*\\.)?${LABEL}(\\.${LABEL})*$`);

export function parseHost(value: string): HostMatch | string {
  const v = value.toLowerCase();
  if (v.length > 253 || !HOST.test(v))
    return `${describeValue(value)} is not a host name (RFC 1123, optionally starting with *.)`;
  return v.startsWith("*.") ? { name: v.slice(2), wildcard: true } : { name: v, wildcard: false };
}

/** The host as written: `api.example.com` or `*.example.com`. */
export function hostText(h: HostMatch): string {
  return h.wildcard ? `*.${h.name}` : h.name;
}

/**
 * Whether every request `host` routes would also match `pattern`: an exact pattern allows that
 * host only; `*.d` allows any name under d and any wildcard under d (`*.d` itself included), never
 * d itself.
 */
export function hostWithin(host: HostMatch, pattern: HostMatch): boolean {
  if (!pattern.wildcard) return !host.wildcard && host.name === pattern.name;
  return host.name.endsWith(`.${pattern.name}`) || (host.wildcard && host.name === pattern.name);
}
