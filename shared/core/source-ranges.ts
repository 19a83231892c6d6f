/*
 * Client addresses as allow lists, deny lists and trusted proxies name them: IPv4 and IPv6
 * addresses and CIDRs, checked strictly, so a list is safe to place unquoted on an `acl` line, in a
 * pattern file or in a runtime API command.
 */

import { isIP } from "node:net";
import { describeValue } from "./describe-value.js";

/**
 * Entries of one list. Lists live in pattern files (core/pattern-files.ts), so HAProxy's 64 words
 * per line no longer bound them; what does is the agent's runtime update: HAProxy 2.6's `add acl`
 * takes one entry per command, and a changed list is swapped whole (prepare, one `add` per entry,
 * commit). 10,000 entries, far beyond the peers' documented uses, keep one swap well under a
 * second (BENCHMARKS.md) and a list under 500 KB of config.
 */
export const MAX_SOURCE_RANGES = 10_000;

/** A list placed on one config line (`--accept-proxy`): HAProxy 2.6 reads at most 64 words per line, `acl <name> src` takes 3. */
export const MAX_INLINE_SOURCE_RANGES = 60;

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const IPV4 = new RegExp(`^${OCTET}(\\.${OCTET}){3}$`);

/** One address or CIDR, IPv4 or IPv6 (no zone ids, no mapped forms), lower-cased; null when it is neither. */
export function parseSource(entry: string): string | null {
  const m = /^([^/]+)(?:\/([0-9]{1,3}))?$/.exec(entry);
  if (!m) return null;
  const ip = m[1]!.toLowerCase();
  const bits = m[2] === undefined ? null : Number(m[2]);
  if (m[2] !== undefined && m[2].length > 1 && m[2].startsWith("0")) return null;
  const cidr = (maxBits: number) => (bits === null ? ip : bits <= maxBits ? `${ip}/${bits}` : null);
  if (IPV4.test(ip)) return cidr(32);
  if (/^[0-9a-f:]+$/.test(ip) && isIP(ip) === 6) return cidr(128);
  return null;
}

/** A comma list of IPv4/IPv6 addresses or CIDRs, at most `max`, duplicates dropped. */
export function parseSourceRanges(value: string, max = MAX_SOURCE_RANGES): string[] | { error: string } {
  const entries = value.split(",").map((e) => e.replace(/^ +| +$/g, ""));
  if (entries.length > max)
    return {
      error: `${entries.length} entries; at most ${max}${max === MAX_INLINE_SOURCE_RANGES ? " fit on one HAProxy line" : ""}`,
    };
  const out = new Set<string>();
  for (const entry of entries) {
    const parsed = parseSource(entry);
    if (parsed === null)
      return {
        error: `${describeValue(entry)} is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or fd00::/8)`,
      };
    out.add(parsed);
  }
  return [...out];
}
