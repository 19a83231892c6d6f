import { Liquid } from "liquidjs";
import type { HostMatch } from "./annotations.js";
import { compileFragment, type Fragment } from "./fragment.js";
import { haproxyQuote } from "./haproxy-quote.js";
import type { Backend, HttpRoute, Model, ServerSlot, TcpFrontend } from "./model.js";

/** The template sources a config is rendered from: the main file and one fragment per repeated item. */
export interface TemplateSet {
  main: string;
  backend: string;
  server: string;
  httpRule: string;
  tcpFrontend: string;
}

export const TEMPLATE_FILES: Record<keyof TemplateSet, string> = {
  main: "haproxy.cfg.liquid",
  backend: "backend.liquid",
  server: "server.liquid",
  httpRule: "http-rule.liquid",
  tcpFrontend: "tcp-frontend.liquid",
};

/** Placeholder address of a free server slot; it is `disabled`, so HAProxy never sends to it. */
export const FREE_SLOT_ADDRESS = "127.0.0.1:1";

export interface BackendView {
  name: string;
  defaults: string;
  algorithm: string;
  stick_expire: string | null;
  cookie: boolean;
  strip_regex: string | null;
  strip_prefix: string | null;
  strip_unless: string | null;
  servers: string;
  namespace: string;
  service: string;
  port: number;
}

export interface ServerView {
  name: string;
  address: string;
  disabled: boolean;
  inter: string;
  cookie: string | null;
}

export interface RuleView {
  backend: string;
  condition: string;
}

export interface TcpView {
  name: string;
  bind: string;
  port: number;
  backend: string;
}

function hostCondition(h: HostMatch): string {
  return h.wildcard ? `{ var(txn.host) -m end .${h.name} }` : `{ var(txn.host) -m str ${h.name} }`;
}

function ruleView(r: HttpRoute): RuleView {
  const backend = r.action === "https-redirect" ? "https_redirect" : r.backend;
  if (r.match.kind === "host") return { backend, condition: hostCondition(r.match.host) };
  const p = r.match.prefix;
  // Segment-bound prefix: /foo and /foo/… match, /foobar does not.
  return { backend, condition: p === "/" ? "TRUE" : `{ path -m str ${p} } || { path -m beg ${p}/ }` };
}

/** Path prefixes hold only [A-Za-z0-9._~:@+=,%/-]; of those, . and + mean something to a regex. */
function prefixRegex(prefix: string): string {
  return `^${prefix.replace(/[.+]/g, (c) => `[${c}]`)}/?(.*)`;
}

export class Renderer {
  private readonly liquid: Liquid;
  private readonly main;
  private readonly backend: Fragment<BackendView>;
  private readonly server: Fragment<ServerView>;
  private readonly rule: Fragment<RuleView>;
  private readonly tcp: Fragment<TcpView>;

  constructor(templates: TemplateSet) {
    // In-memory templates only: a template must not read files on the render path.
    this.liquid = new Liquid({ templates: {}, strictFilters: true, greedy: false });
    this.main = this.liquid.parse(templates.main);
    this.backend = compileFragment(this.liquid, templates.backend, "backend");
    this.server = compileFragment(this.liquid, templates.server, "server");
    this.rule = compileFragment(this.liquid, templates.httpRule, "rule");
    this.tcp = compileFragment(this.liquid, templates.tcpFrontend, "tcp");
  }

  private serversText(b: Backend, inter: string): string {
    // One view object for every line: 100,000 server lines should not mean 100,000 allocations.
    const view: ServerView = { name: "", address: "", disabled: false, inter, cookie: null };
    let out = "";
    for (const s of b.servers as ServerSlot[]) {
      view.name = s.name;
      view.address = s.address ?? FREE_SLOT_ADDRESS;
      view.disabled = s.address === null;
      view.cookie = s.cookie;
      out += this.server(view);
    }
    return out;
  }

  /**
   * Text of backends and rules by object identity. The model builder hands out the same objects
   * for Services that did not change, so a warm instance re-renders only what changed.
   */
  private readonly backendTexts = new WeakMap<Backend, { inter: string; text: string }>();
  private readonly ruleTexts = new WeakMap<HttpRoute, string>();

  backendText(b: Backend, inter: string): string {
    const cached = this.backendTexts.get(b);
    if (cached?.inter === inter) return cached.text;
    const text = this.renderBackend(b, inter);
    this.backendTexts.set(b, { inter, text });
    return text;
  }

  private ruleText(r: HttpRoute): string {
    let text = this.ruleTexts.get(r);
    if (text === undefined) {
      text = this.rule(ruleView(r));
      this.ruleTexts.set(r, text);
    }
    return text;
  }

  private renderBackend(b: Backend, inter: string): string {
    return this.backend({
      name: b.name,
      defaults: b.mode === "tcp" ? "tcp_defaults" : "http_defaults",
      algorithm: b.algorithm,
      stick_expire: b.affinity.kind === "source" ? `${b.affinity.timeoutSeconds}s` : null,
      cookie: b.affinity.kind === "cookie",
      strip_regex: b.strip ? prefixRegex(b.strip.prefix) : null,
      strip_prefix: b.strip ? b.strip.prefix : null,
      strip_unless: b.strip?.unlessHost ? hostCondition(b.strip.unlessHost) : null,
      servers: this.serversText(b, inter),
      namespace: b.namespace,
      service: b.service,
      port: b.servicePort,
    });
  }

  render(model: Model): string {
    const o = model.options;
    const https = o.sslCert !== undefined;
    let backends = "";
    for (const b of model.backends) backends += this.backendText(b, o.checkInterval);
    let httpRules = "";
    for (const r of model.httpRoutes) httpRules += this.ruleText(r);
    let httpsRules = "";
    for (const r of model.httpsRoutes) httpsRules += this.rule(ruleView(r));
    let tcpFrontends = "";
    for (const t of model.tcpFrontends as TcpFrontend[]) tcpFrontends += this.tcp({ name: t.name, bind: o.bindAddress, port: t.port, backend: t.backend });
    const needsRedirect = https && model.httpRoutes.some((r) => r.action === "https-redirect");
    const { status, body } = model.defaultPage;
    const bodyless = status === 204 || status === 304;
    return this.liquid.renderSync(this.main, {
      o: {
        stats_socket: o.statsSocket,
        hard_stop_after: o.hardStopAfter,
        server_state_file: o.serverStateFile,
        syslog: o.syslog,
        https,
        ssl_cert: o.sslCert ?? null,
        ssl_ca_cert: o.sslCaCert ?? null,
        hsts_max_age: o.hstsMaxAge > 0 ? o.hstsMaxAge : null,
        bind: o.bindAddress,
        http_port: o.httpPort,
        https_port: o.httpsPort,
        stats_bind: o.statsBind,
        stats_port: o.statsPort,
        stats_user: o.statsUser ?? null,
        redirect: needsRedirect
          ? o.httpsPort === 443
            ? "scheme https"
            : `prefix https://%[req.hdr(host),field(1,:)]:${o.httpsPort}`
          : null,
        default_status: status,
        default_body: bodyless ? null : haproxyQuote(body),
      },
      http_rules: httpRules,
      https_rules: httpsRules,
      tcp_frontends: tcpFrontends,
      backends,
    }) as string;
  }
}
