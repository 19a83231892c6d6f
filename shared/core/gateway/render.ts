/*
 * Gateway API routing (routing.ts) as HAProxy config text. A frontend tries its match entries in
 * precedence order: the first a request satisfies records its rule in `txn.gw`; the rule's
 * filters act on that variable, a random draw (`txn.gwpick`, `rand(total weight)`) picks among
 * its weighted backends, and a request no entry matched gets the frontend's default: 404 on a
 * port of its own, the Services' routes on --http-port. Every value a route author chose is
 * written through haproxyQuote, and log-format values have `%` doubled first.
 *
 * When the template routes by maps, render-maps.ts writes the frontends instead: simple entries
 * in match maps, every rule without filters drawing its backend in the weights map; a rule with
 * filters and more than one backendRef draws there too (its backend's name in `txn.gwbackend`),
 * so that a change of weights only is applied without a reload. Otherwise a rule's thresholds
 * are written into its lines.
 *
 * Lines come in the order HAProxy evaluates them (all `http-request` rules before the first
 * `use_backend`), so that `haproxy -c` has nothing to warn about. An HTTPS port's frontend is the
 * same, bound with TLS: routing by the Host header is HTTP's.
 */

import { haproxyQuote } from "../render/haproxy-quote.js";
import { slotName } from "../model/slots.js";
import { FREE_SLOT_ADDRESS } from "../haproxy-config/server-line.js";
import { DRAW_RANGE, WEIGHTS_MAP } from "../haproxy-config/gateway-weights.js";
import { certificatePath } from "./certificates.js";
import type { GatewayFrontend, GatewayRouting, HeaderEdits, MatchEntry, ResolvedRule } from "./routing.js";

/** The backends that answer a rule's invalid share, and an unmatched request on a Gateway's own port. */
export const INVALID_BACKEND = "gw:500";
export const NOT_FOUND_BACKEND = "gw:404";

/** A log-format value (set-header, redirect, set-path): `%` is literal only doubled. */
const fmt = (text: string) => haproxyQuote(text.replace(/%/g, "%%"));

function regexEscape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A PathPrefix value on a segment boundary: `/foo` and `/foo/` both match `/foo` and `/foo/…`, never `/foobar`. */
function prefixKey(value: string): string | null {
  const trimmed = value.replace(/\/+$/, "");
  return trimmed === "" ? null : `${trimmed}/`;
}

/**
 * An entry's conditions. Header and query parameter matches are named ACLs (`acls`), declared
 * before the line that uses them: HAProxy reads at most 64 words a line, and an entry may hold 16
 * of each.
 */
export function conditions(e: MatchEntry, at: number, acls: string[]): string[] {
  const c: string[] = [];
  if (e.host)
    c.push(
      e.host.wildcard
        ? `{ var(txn.host) -m end ${haproxyQuote(`.${e.host.name}`)} }`
        : `{ var(txn.host) -m str ${haproxyQuote(e.host.name)} }`,
    );
  if (e.path.type === "Exact") c.push(`{ path -m str ${haproxyQuote(e.path.value)} }`);
  else {
    const key = prefixKey(e.path.value);
    if (key !== null) c.push(`{ path,concat(/) -m beg ${haproxyQuote(key)} }`);
  }
  if (e.method) c.push(`{ method ${e.method} }`);
  e.headers.forEach((h, k) => {
    // The last occurrence of a repeated header, as the header maps compare it (render-maps.ts).
    acls.push(`    acl gw_${at}_h${k} req.fhdr(${h.name},-1) -m str ${haproxyQuote(h.value)}`);
    c.push(`gw_${at}_h${k}`);
  });
  e.queryParams.forEach((q, k) => {
    acls.push(`    acl gw_${at}_q${k} url_param(${q.name}) -m str ${haproxyQuote(q.value)}`);
    c.push(`gw_${at}_q${k}`);
  });
  return c;
}

function headerLines(kind: "request" | "response", edits: HeaderEdits, when: string): string[] {
  const out: string[] = [];
  for (const h of edits.set) out.push(`    http-${kind} set-header ${h.name} ${fmt(h.value)} if ${when}`);
  for (const h of edits.add) out.push(`    http-${kind} add-header ${h.name} ${fmt(h.value)} if ${when}`);
  for (const name of edits.remove) out.push(`    http-${kind} del-header ${name} if ${when}`);
  return out;
}

function redirectLine(r: NonNullable<ResolvedRule["redirect"]>, when: string): string {
  const host = r.hostname !== null ? r.hostname.replace(/%/g, "%%") : "%[req.hdr(host),field(1,:)]";
  const location = `${r.scheme ?? "http"}://${host}${r.port !== null ? `:${r.port}` : ""}%[pathq]`;
  return `    http-request redirect location ${haproxyQuote(location)} code ${r.statusCode} if ${when}`;
}

function rewriteLines(rule: ResolvedRule, when: string): string[] {
  const r = rule.rewrite!;
  const out: string[] = [];
  if (r.hostname !== null) out.push(`    http-request set-header host ${fmt(r.hostname)} if ${when}`);
  if (r.path?.type === "ReplaceFullPath") out.push(`    http-request set-path ${fmt(r.path.value)} if ${when}`);
  else if (r.path?.type === "ReplacePrefixMatch") {
    const prefix = regexEscape(r.path.prefix.replace(/\/+$/, ""));
    const value = r.path.value.replace(/\/+$/, "");
    // The path that is the prefix alone becomes the replacement alone (at least `/`); a longer one
    // keeps what follows the prefix. Which case applies is decided before either rewrites.
    out.push(
      `    http-request set-var(txn.gwwhole) bool(1) if ${when} { path -m reg ${haproxyQuote(`^${prefix}/?$`)} }`,
    );
    out.push(`    http-request set-path ${fmt(value === "" ? "/" : value)} if ${when} { var(txn.gwwhole) -m bool }`);
    out.push(
      `    http-request replace-path ${haproxyQuote(`^${prefix}(/.*)$`)} ${haproxyQuote(`${value.replace(/%/g, "%%")}\\1`)} if ${when} !{ var(txn.gwwhole) -m bool }`,
    );
  }
  return out;
}

/**
 * The rule's `use_backend` lines: a single share, a lookup of a random draw in the weights map
 * (`id`, its number there), or one line per share of a random draw.
 */
function backendLines(
  rule: ResolvedRule,
  when: string,
  id: number | undefined,
): { draw: string | null; uses: string[] } {
  if (id !== undefined)
    // Looked up in an http-request line: a use_backend's expression is compiled once the config
    // is parsed, when the map's path no longer resolves beside the config (`default-path config`).
    return {
      draw: `    http-request set-var(txn.gwbackend) rand(${DRAW_RANGE}),add(${id * DRAW_RANGE}),map_int(${WEIGHTS_MAP},${INVALID_BACKEND}) if ${when}`,
      uses: [`    use_backend %[var(txn.gwbackend)] if ${when}`],
    };
  const shares = rule.picks.filter((p) => p.weight > 0);
  const total = shares.reduce((sum, p) => sum + p.weight, 0);
  if (shares.length === 0) return { draw: null, uses: [`    use_backend ${INVALID_BACKEND} if ${when}`] };
  if (shares.length === 1)
    return { draw: null, uses: [`    use_backend ${shares[0]!.backend ?? INVALID_BACKEND} if ${when}`] };
  const uses: string[] = [];
  let upTo = 0;
  shares.forEach((p, i) => {
    upTo += p.weight;
    const last = i === shares.length - 1;
    uses.push(
      `    use_backend ${p.backend ?? INVALID_BACKEND} if ${when}${last ? "" : ` { var(txn.gwpick) -m int lt ${upTo} }`}`,
    );
  });
  return { draw: `    http-request set-var(txn.gwpick) rand(${total}) if ${when}`, uses };
}

/**
 * A rule's lines when `txn.gw` holds `i`, added to `req` (http-request/http-response) and `uses`
 * (use_backend). `id`: the rule's number in the weights map, when it draws there.
 */
export function ruleLines(rule: ResolvedRule, i: number, id: number | undefined, req: string[], uses: string[]): void {
  const when = `{ var(txn.gw) -m int eq ${i} }`;
  req.push(`    # ${rule.route} rule ${rule.ruleIndex}`);
  if (rule.requestHeaders) req.push(...headerLines("request", rule.requestHeaders, when));
  if (rule.responseHeaders) req.push(...headerLines("response", rule.responseHeaders, when));
  if (rule.redirect) {
    req.push(redirectLine(rule.redirect, when));
    return;
  }
  if (rule.rewrite) req.push(...rewriteLines(rule, when));
  const b = backendLines(rule, when, id);
  if (b.draw) req.push(b.draw);
  uses.push(...b.uses);
}

/** A frontend's Gateway lines: `requests` (http-request/http-response) and `uses` (use_backend), in that order. */
export interface FrontendText {
  requests: string;
  uses: string;
}

/** A frontend's lines with a line for every entry and rule (render-maps.ts writes them when the template routes by maps). */
export function frontendLines(f: GatewayFrontend): FrontendText {
  const req: string[] = [
    "    # Gateway API routes, in the spec's precedence order: the first match picks the rule (txn.gw).",
  ];
  for (const [at, e] of f.entries.entries()) {
    const acls: string[] = [];
    const c = conditions(e, at, acls);
    req.push(...acls);
    req.push(
      `    http-request set-var(txn.gw) int(${e.rule}) if !{ var(txn.gw) -m found }${c.length > 0 ? ` ${c.join(" ")}` : ""}`,
    );
  }
  const uses: string[] = [];
  f.rules.forEach((rule, i) => {
    ruleLines(rule, i, undefined, req, uses);
  });
  return { requests: `${req.join("\n")}\n`, uses: uses.length > 0 ? `${uses.join("\n")}\n` : "" };
}

/**
 * The words that make a bind TLS: every certificate of the port's HTTPS listeners, from the node's
 * --gateway-cert-dir; none on an HTTP port. TLS 1.2 at least, whatever the Services' own HTTPS
 * frontend sets globally.
 */
function tlsWords(f: GatewayFrontend): string {
  if (f.certificates.length === 0) return "";
  return ` ssl ${f.certificates.map((c) => `crt ${certificatePath(c)}`).join(" ")} ssl-min-ver TLSv1.2`;
}

/**
 * The Gateway section placed before the Services' backends: a frontend for each listener port
 * other than --http-port (its lines from `lines`), the backends the rules reach, and the 500 and
 * 404 answers.
 */
export function gatewaySection(
  routing: GatewayRouting,
  bind: string,
  lines: (f: GatewayFrontend) => FrontendText = frontendLines,
): string {
  if (routing.frontends.length === 0 && routing.backends.length === 0) return "";
  let out = "";
  for (const f of routing.frontends) {
    if (f.shared) continue;
    const { requests, uses } = lines(f);
    out += `frontend gw:${f.port} from http_defaults\n    bind ${bind}:${f.port}${tlsWords(f)}\n`;
    out += "    http-request set-var(txn.host) req.hdr(host),field(1,:),lower\n";
    out += `${requests}${uses}    default_backend ${NOT_FOUND_BACKEND}\n\n`;
  }
  for (const b of routing.backends) {
    out += `backend ${b.name} from http_defaults\n    balance roundrobin\n`;
    b.servers.forEach((address, i) => {
      out += `    server ${slotName(i)} ${address ?? `${FREE_SLOT_ADDRESS} disabled`}\n`;
    });
    out += "\n";
  }
  out += `backend ${INVALID_BACKEND} from http_defaults\n    http-request return status 500\n\n`;
  out += `backend ${NOT_FOUND_BACKEND} from http_defaults\n    http-request return status 404\n\n`;
  return out;
}
