/*
 * The model's values as the templates print them: a route's condition and backend, a backend's
 * `default-server` parameters, the path strip, the pattern files of the source lists, and the
 * HTTP frontend's lookup with Gateway routes on its port, and the main template's view (render.ts
 * puts them together).
 */

import { frontendLines } from "../gateway/render.js";
import { type GatewayMaps, mapFrontendLines } from "../gateway/render-maps.js";
import { PATTERN_PATHS, PATTERN_SECTION, type PatternFile, patternFilePath } from "../haproxy-config/pattern-files.js";
import { ROUTE_LOOKUP } from "../haproxy-config/route-maps.js";
import { SERVICE_MAP_REFERENCE } from "../haproxy-config/service-map.js";
import type { BackendSettings, RedirectCode } from "../model/backend-settings.js";
import type { HostMatch } from "../model/host-match.js";
import type { HttpRoute, Model } from "../model/model.js";
import { nodeWord } from "../haproxy-config/environment.js";
import { CRT_LIST_PREFIX } from "../settings/options.js";
import { haproxyQuote } from "./haproxy-quote.js";
import { type MainView, type RuleView, STATS_PASSWORD_REF } from "./template-views.js";

export function hostCondition(h: HostMatch): string {
  return h.wildcard ? `{ var(txn.host) -m end .${h.name} }` : `{ var(txn.host) -m str ${h.name} }`;
}

/** 301, the redirect servicelb always had, keeps its backend's name, so configs stay as they were. */
export function redirectBackend(code: RedirectCode): string {
  return code === 301 ? "https_redirect" : `https_redirect_${code}`;
}

/** The backend an HTTP route to an HTTPS-only Service sends plain requests to. */
export const routeRedirect = (r: HttpRoute): string => redirectBackend(r.redirectCode ?? 301);

/**
 * The backend's `default-server` parameters. Said once per backend rather than on each server
 * line, so server lines keep the one shape the agent changes at runtime (haproxy-config/server-line.ts).
 */
export function serverParams(s: BackendSettings, inter: string): string | null {
  const p: string[] = [];
  if (s.check) p.push(`check inter ${inter}`);
  if (s.maxconn !== null) p.push(`maxconn ${s.maxconn}`);
  // TLS to the pod: pods hold self-signed certificates, so they are not verified; SNI is the
  // client's Host (lower-cased, without port), ALPN says which HTTP the pod is to speak.
  // Health checks must speak the pod's HTTP too (an HTTP/2-only pod such as gRPC answers nothing
  // else): they follow `proto`, but not `alpn` (measured on 2.6: L7RSP without check-alpn).
  if (s.backendProtocol === "h2") p.push("proto h2");
  else if (s.backendProtocol === "h1-ssl") p.push("ssl verify none sni var(txn.host) alpn http/1.1");
  else if (s.backendProtocol === "h2-ssl") p.push("ssl verify none sni var(txn.host) alpn h2");
  if (s.check && s.backendProtocol === "h1-ssl") p.push("check-alpn http/1.1");
  else if (s.check && s.backendProtocol === "h2-ssl") p.push("check-alpn h2");
  if (s.proxyProtocol === "v1") p.push("send-proxy");
  else if (s.proxyProtocol === "v2") p.push("send-proxy-v2");
  // Health checks carry the header too: a pod that expects it would refuse them otherwise.
  if (s.check && s.proxyProtocol !== null) p.push("check-send-proxy");
  return p.length > 0 ? p.join(" ") : null;
}

export function ruleView(r: HttpRoute): RuleView {
  const backend = r.action === "https-redirect" ? routeRedirect(r) : r.backend;
  if (r.match.kind === "host") return { backend, condition: hostCondition(r.match.host) };
  const p = r.match.prefix;
  // Segment-bound prefix: /foo and /foo/… match, /foobar does not.
  return { backend, condition: p === "/" ? "TRUE" : `{ path -m str ${p} } || { path -m beg ${p}/ }` };
}

/** Path prefixes hold only [A-Za-z0-9._~:@+=,%/-]; of those, . and + mean something to a regex. */
export function prefixRegex(prefix: string): string {
  return `^${prefix.replace(/[.+]/g, (c) => `[${c}]`)}/?(.*)`;
}

export const PATTERN_PATHS_BYTES = Buffer.from(PATTERN_PATHS, "utf8");
export const PATTERN_SECTION_BYTES = Buffer.from(`${PATTERN_SECTION}\n`, "utf8");
export const ROUTE_LOOKUP_BYTES = Buffer.from(SERVICE_MAP_REFERENCE + ROUTE_LOOKUP, "utf8");

/**
 * The HTTP frontend's routing with Gateway routes on its port: theirs first, so a request a
 * Gateway route matches goes where the route says, and the Services' routes for the rest. Every
 * `http-request` line comes before the first `use_backend`, as HAProxy evaluates them.
 */
export function sharedRouteLookup(gateway: Model["gateway"], maps: GatewayMaps | undefined): Buffer {
  const shared = gateway?.frontends.find((f) => f.shared);
  if (!shared) return ROUTE_LOOKUP_BYTES;
  const { requests, uses } = maps ? mapFrontendLines(shared, maps) : frontendLines(shared);
  const at = ROUTE_LOOKUP.lastIndexOf("    use_backend ");
  return Buffer.from(
    SERVICE_MAP_REFERENCE + requests + ROUTE_LOOKUP.slice(0, at) + uses + ROUTE_LOOKUP.slice(at),
    "utf8",
  );
}

/** One file per list and Service: the backends of a Service's ports share its annotations, hence its lists. */
export function patternFiles(model: Model): PatternFile[] {
  const files = new Map<string, readonly string[]>();
  for (const b of model.backends) {
    const { allowSources, denySources } = b.settings;
    if (allowSources) files.set(patternFilePath(b.namespace, b.service, "allow"), allowSources);
    if (denySources) files.set(patternFilePath(b.namespace, b.service, "deny"), denySources);
  }
  return [...files].map(([path, entries]) => ({ path, entries }));
}

/** What the main template sees: the options, the redirects the HTTPS routes need and the default page. */
export function mainView(model: Model): MainView {
  const o = model.options;
  const https = o.sslCert !== undefined;
  const codes = new Set<RedirectCode>();
  if (https) for (const r of model.httpRoutes) if (r.action === "https-redirect") codes.add(r.redirectCode ?? 301);
  const { status, body } = model.defaultPage;
  const bodyless = status === 204 || status === 304;
  return {
    stats_socket: nodeWord(o.statsSocket),
    hard_stop_after: o.hardStopAfter,
    server_state_file: nodeWord(o.serverStateFile),
    syslog: o.syslog,
    https,
    ssl_cert: o.sslCert?.startsWith(CRT_LIST_PREFIX) ? o.sslCert.slice(CRT_LIST_PREFIX.length) : (o.sslCert ?? null),
    ssl_cert_keyword: o.sslCert?.startsWith(CRT_LIST_PREFIX) ? "crt-list" : "crt",
    ssl_ca_cert: o.sslCaCert ?? null,
    hsts_max_age: o.hstsMaxAge > 0 ? o.hstsMaxAge : null,
    bind: nodeWord(o.bindAddress),
    http_port: o.httpPort,
    https_port: o.httpsPort,
    stats_bind: nodeWord(o.statsBind),
    stats_port: o.statsPort,
    stats_user: o.statsUser ?? null,
    stats_password_ref: STATS_PASSWORD_REF,
    redirect:
      codes.size > 0
        ? o.httpsPort === 443
          ? "scheme https"
          : `prefix https://%[req.hdr(host),field(1,:)]:${o.httpsPort}`
        : null,
    redirects: [...codes].sort((a, b) => a - b).map((code) => ({ name: redirectBackend(code), code })),
    timeout_server: o.timeoutServer,
    timeout_connect: o.timeoutConnect,
    timeout_client: o.timeoutClient,
    timeout_tunnel: o.timeoutTunnel,
    timeout_queue: o.timeoutQueue ?? null,
    accept_proxy: o.acceptProxy?.join(" ") ?? null,
    default_status: status,
    default_body: bodyless ? null : haproxyQuote(body),
    has_tcp_frontends: model.tcpFrontends.length > 0,
    check_interval: o.checkInterval,
  };
}
