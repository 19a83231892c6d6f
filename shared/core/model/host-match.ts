/*
 * Host names as servicelb matches them: `lb.host` values, `--host-claims` and `--own-hosts`
 * patterns share one grammar (RFC 1123 names, optionally `*.` for every name under a domain).
 */

import { describeValue } from "../describe-value.js";

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

/**
 * Whether a name is an IPv4 address to a client: the WHATWG URL standard reads any host whose last
 * label is a number (`127.0.0.1`, `127.1`, `2130706433`, `0x7f.1`) as one, so browsers send these
 * as addresses of the load balancer itself. A wildcard is one when every name under it is.
 */
export function isAddress(h: HostMatch): boolean {
  return /^([0-9]+|0x[0-9a-f]*)$/.test(h.name.slice(h.name.lastIndexOf(".") + 1));
}

/**
 * Common public suffixes of two labels (after the Public Suffix List, publicsuffix.org): countries'
 * second levels, then hosting platforms that give each customer a name. Under them, as under every
 * top-level domain, each name belongs to someone else. docs/annotations.md#who-owns-a-route lists them.
 */
export const PUBLIC_SUFFIXES: ReadonlySet<string> = new Set(
  `co.uk org.uk me.uk ltd.uk plc.uk net.uk ac.uk gov.uk
   com.au net.au org.au edu.au gov.au id.au co.nz net.nz org.nz
   co.jp ne.jp or.jp ac.jp go.jp co.kr or.kr co.in net.in org.in co.za org.za co.il co.id co.th
   com.br net.br org.br com.cn net.cn org.cn com.hk com.sg com.tw com.my com.ph com.vn
   com.mx com.ar com.co com.tr com.ua com.pl
   github.io gitlab.io herokuapp.com appspot.com web.app firebaseapp.com netlify.app vercel.app
   pages.dev workers.dev azurewebsites.net cloudfront.net blogspot.com onrender.com fly.dev`.split(/\s+/),
);

/** The public suffix a wildcard would take every site under (`*.com`, `*.co.uk`), or null. */
export function publicSuffixClaim(h: HostMatch): string | null {
  if (!h.wildcard) return null;
  return !h.name.includes(".") || PUBLIC_SUFFIXES.has(h.name) ? h.name : null;
}
