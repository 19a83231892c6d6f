/*
 * Client addresses as allow lists, deny lists and trusted proxies name them: IPv4 and IPv6
 * addresses and CIDRs, checked strictly, so a list is safe to place unquoted on an `acl` line, in a
 * pattern file or in a runtime API command.
 */

import { isIP } from "node:net";
import { describeValue } from "../describe-value.js";

/**
 * Entries of one list. Lists live in pattern files (core/haproxy-config/pattern-files.ts), so HAProxy's 64 words
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

/**
 * One address or CIDR, IPv4 or IPv6 (no zone ids), lower-cased; null when it is neither. An
 * IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, `::ffff:a00:1`, with a prefix of 96 bits or more)
 * is written as the IPv4 address it maps, so that a list means the same client whichever family
 * the client connects with; other IPv6 forms with a dotted tail (`::10.0.0.1`) are refused.
 */
export function parseSource(entry: string): string | null {
  const m = /^([^/]+)(?:\/([0-9]{1,3}))?$/.exec(entry);
  if (!m) return null;
  const ip = m[1]!.toLowerCase();
  const bits = m[2] === undefined ? null : Number(m[2]);
  if (m[2] !== undefined && m[2].length > 1 && m[2].startsWith("0")) return null;
  const cidr = (addr: string, maxBits: number) => (bits === null ? addr : bits <= maxBits ? `${addr}/${bits}` : null);
  if (IPV4.test(ip)) return cidr(ip, 32);
  if (!/^[0-9a-f:.]+$/.test(ip) || isIP(ip) !== 6) return null;
  const mapped = mappedIpv4(ip);
  if (mapped !== null && (bits === null || bits >= 96)) return bits === null ? mapped : `${mapped}/${bits - 96}`;
  return ip.includes(".") ? null : cidr(ip, 128);
}

/** The IPv4 address an IPv4-mapped IPv6 address (`::ffff:0:0/96`) stands for, else null. */
function mappedIpv4(ipv6: string): string | null {
  // The URL parser writes an IPv6 address in its one canonical form (RFC 5952).
  const m = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(new URL(`http://[${ipv6}]/`).hostname);
  if (!m) return null;
  const hi = Number.parseInt(m[1]!, 16);
  const lo = Number.parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** A list as read entry by entry: what can be applied, and what cannot. */
export interface SourceListReading {
  /** The valid entries in canonical form, duplicates once, the first `max` of them. */
  entries: string[];
  /** Entries that are not an address or CIDR, as written. */
  invalid: string[];
  /** Valid entries past the first `max`, not kept. */
  beyond: number;
}

/** A comma list of IPv4/IPv6 addresses or CIDRs, read entry by entry (spaces around commas ignored). */
export function readSourceList(value: string, max = MAX_SOURCE_RANGES): SourceListReading {
  const entries = new Set<string>();
  const invalid: string[] = [];
  let beyond = 0;
  for (const raw of value.split(",")) {
    const parsed = parseSource(raw.replace(/^ +| +$/g, ""));
    if (parsed === null) invalid.push(raw);
    else if (entries.has(parsed)) continue;
    else if (entries.size < max) entries.add(parsed);
    else beyond++;
  }
  return { entries: [...entries], invalid, beyond };
}

/** A comma list of IPv4/IPv6 addresses or CIDRs, at most `max`, duplicates dropped; any bad entry refuses it whole. */
export function parseSourceRanges(value: string, max = MAX_SOURCE_RANGES): string[] | { error: string } {
  const count = value.split(",").length;
  if (count > max)
    return {
      error: `${count} entries; at most ${max}${max === MAX_INLINE_SOURCE_RANGES ? " fit on one HAProxy line" : ""}`,
    };
  const { entries, invalid } = readSourceList(value, max);
  if (invalid.length > 0)
    return {
      error: `${describeValue(invalid[0]!.replace(/^ +| +$/g, ""))} is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or fd00::/8)`,
    };
  return entries;
}
