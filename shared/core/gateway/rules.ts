/*
 * One HTTPRoute rule checked against what servicelb renders: its matches and filters become the
 * render-ready parts of routing.ts, or the rule is refused with the reason (UnsupportedValue)
 * that its route's status reports. Values that reach the config inside a fetch's parentheses
 * (header and query parameter names) are held to a narrower grammar than the API's; every other
 * value is quoted by render.ts.
 */

import type { HTTPRouteRule, RouteFilter } from "./schemas.js";
import type { HeaderEdits, PathMatch, Redirect, Rewrite } from "./routing.js";

/** What a rule matches, before hostnames are attached (resolve.ts). */
export interface MatchParts {
  path: PathMatch;
  method: string | null;
  headers: Array<{ name: string; value: string }>;
  queryParams: Array<{ name: string; value: string }>;
}

/** A redirect before the listener it is served on fills in its port. */
export type RedirectSpec = Omit<Redirect, "port"> & { port: number | null };

export interface CheckedRule {
  matches: MatchParts[];
  requestHeaders: HeaderEdits | null;
  responseHeaders: HeaderEdits | null;
  rewrite: Rewrite | null;
  redirect: RedirectSpec | null;
}

/** The API's path characters (shared_types.go HTTPPathMatch), without `//` or `/./`-style segments. */
const PATH = /^\/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*$/;
/** Names placed inside `req.fhdr(…)`, `url_param(…)` and header actions. */
const TOKEN = /^[A-Za-z0-9_.-]{1,256}$/;

function pathProblem(value: string): string | null {
  if (!PATH.test(value)) return `path ${JSON.stringify(value.slice(0, 80))} is not an absolute path of URL characters`;
  if (/\/\/|\/\.\.?(\/|$)/.test(value))
    return `path ${JSON.stringify(value.slice(0, 80))} has an empty, . or .. segment`;
  return null;
}

/** RFC 9110 field values: no control characters but tab (a CR or LF would split the header). */
const FIELD_VALUE = /^[^\x00-\x08\x0a-\x1f\x7f]*$/;

function headerEdits(m: NonNullable<RouteFilter["requestHeaderModifier"]>, what: string): HeaderEdits | string {
  for (const name of [...m.set.map((h) => h.name), ...m.add.map((h) => h.name), ...m.remove])
    if (!TOKEN.test(name))
      return `${what}: header name ${JSON.stringify(name)} is not supported (letters, digits, - _ . only)`;
  for (const h of [...m.set, ...m.add])
    if (!FIELD_VALUE.test(h.value)) return `${what}: the value of ${h.name} holds a control character`;
  return { set: m.set, add: m.add, remove: m.remove };
}

function rewriteOf(f: NonNullable<RouteFilter["urlRewrite"]>, matches: readonly MatchParts[]): Rewrite | string {
  const p = f.path;
  let path: Rewrite["path"] = null;
  if (p?.type === "ReplaceFullPath") {
    const value = p.replaceFullPath ?? "/";
    const problem = pathProblem(value);
    if (problem) return `URLRewrite: ${problem}`;
    path = { type: "ReplaceFullPath", value };
  } else if (p?.type === "ReplacePrefixMatch") {
    const only = matches.length === 1 ? matches[0]! : undefined;
    if (only?.path.type !== "PathPrefix")
      return "URLRewrite: ReplacePrefixMatch needs exactly one match, a PathPrefix one";
    const value = p.replacePrefixMatch ?? "/";
    const problem = pathProblem(value);
    if (problem) return `URLRewrite: ${problem}`;
    path = { type: "ReplacePrefixMatch", prefix: only.path.value, value };
  }
  return { hostname: f.hostname ?? null, path };
}

/** The rule's render-ready parts, or why it is not served. */
export function checkRule(rule: HTTPRouteRule): CheckedRule | string {
  const matches: MatchParts[] = [];
  for (const m of rule.matches) {
    if (m.path.type === "RegularExpression") return "RegularExpression path matches are not supported";
    const problem = pathProblem(m.path.value);
    if (problem) return problem;
    for (const h of m.headers) {
      if (h.type !== "Exact") return "RegularExpression header matches are not supported";
      if (!TOKEN.test(h.name))
        return `header name ${JSON.stringify(h.name)} is not supported (letters, digits, - _ . only)`;
      if (!FIELD_VALUE.test(h.value)) return `the value matched in header ${h.name} holds a control character`;
    }
    for (const q of m.queryParams) {
      if (q.type !== "Exact") return "RegularExpression query parameter matches are not supported";
      if (!TOKEN.test(q.name))
        return `query parameter name ${JSON.stringify(q.name)} is not supported (letters, digits, - _ . only)`;
    }
    // The spec: of two header (or query) matches of one name, the first counts.
    const first = <T extends { name: string }>(list: readonly T[], fold: (s: string) => string) =>
      list.filter((x, i) => list.findIndex((y) => fold(y.name) === fold(x.name)) === i);
    matches.push({
      path: { type: m.path.type, value: m.path.value },
      method: m.method,
      headers: first(m.headers, (s) => s.toLowerCase()).map(({ name, value }) => ({ name, value })),
      queryParams: first(m.queryParams, (s) => s).map(({ name, value }) => ({ name, value })),
    });
  }
  if (rule.backendRefs.some((b) => b.filters.length > 0)) return "filters on a backendRef are not supported";
  const out: CheckedRule = { matches, requestHeaders: null, responseHeaders: null, rewrite: null, redirect: null };
  const seen = new Set<string>();
  for (const f of rule.filters) {
    if (seen.has(f.type)) return `filter ${f.type} appears twice`;
    seen.add(f.type);
    if (f.type === "RequestHeaderModifier" && f.requestHeaderModifier) {
      const edits = headerEdits(f.requestHeaderModifier, f.type);
      if (typeof edits === "string") return edits;
      out.requestHeaders = edits;
    } else if (f.type === "ResponseHeaderModifier" && f.responseHeaderModifier) {
      const edits = headerEdits(f.responseHeaderModifier, f.type);
      if (typeof edits === "string") return edits;
      out.responseHeaders = edits;
    } else if (f.type === "RequestRedirect" && f.requestRedirect) {
      const r = f.requestRedirect;
      if (r.path) return "RequestRedirect with a path is not supported";
      out.redirect = {
        scheme: r.scheme ?? null,
        hostname: r.hostname ?? null,
        port: r.port ?? null,
        statusCode: r.statusCode,
      };
    } else if (f.type === "URLRewrite" && f.urlRewrite) {
      const rewrite = rewriteOf(f.urlRewrite, matches);
      if (typeof rewrite === "string") return rewrite;
      out.rewrite = rewrite;
    } else {
      return `filter ${f.type} is not supported`;
    }
  }
  if (out.redirect && out.rewrite) return "RequestRedirect and URLRewrite cannot be combined";
  return out;
}
