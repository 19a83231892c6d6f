import { Liquid } from "liquidjs";
import type { HostMatch } from "../model/host-match.js";
import type { BackendSettings, RedirectCode } from "../model/backend-settings.js";
import { type ByteWriter, ChunkList, type ConfigChunks, SlabWriter } from "../publish/chunks.js";
import { compileFragment, type Fragment, Inline } from "./fragment.js";
import { frontendLines, gatewaySection } from "../gateway/render.js";
import { haproxyQuote } from "./haproxy-quote.js";
import type { Backend, HttpRoute, Model, TcpFrontend } from "../model/model.js";
import { CRT_LIST_PREFIX } from "../settings/options.js";
import {
  PATTERN_PATHS,
  PATTERN_SECTION,
  type PatternFile,
  patternFilePath,
  renderPatternFiles,
} from "../haproxy-config/pattern-files.js";
import { compareStrings } from "../compare.js";
import { ROUTE_LOOKUP, routeMapLines } from "../haproxy-config/route-maps.js";
import { SERVICE_MAP, SERVICE_MAP_REFERENCE, serviceMapLine } from "../haproxy-config/service-map.js";
import { FREE_SLOT_ADDRESS } from "../haproxy-config/server-line.js";
import { nodeWord } from "../haproxy-config/environment.js";
import { slotName } from "../model/slots.js";

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

/**
 * The node variable HAProxy reads the stats password from, so it is never in a config. The agent
 * refuses a config that references it while the variable is unset (HAProxy would expand it to "").
 */
export const STATS_PASSWORD_VARIABLE = "SERVICELB_STATS_PASSWORD";
export const STATS_PASSWORD_REF = `\${${STATS_PASSWORD_VARIABLE}}`;

export interface BackendView {
  name: string;
  defaults: string;
  algorithm: string;
  stick_expire: string | null;
  cookie: boolean;
  strip_regex: string | null;
  strip_prefix: string | null;
  strip_unless: string | null;
  /** The server lines, written by the server fragment straight into the output. */
  servers: Inline;
  namespace: string;
  service: string;
  port: number;
  /** Per-Service timeouts (null: the defaults section's). */
  timeout_server: string | null;
  timeout_connect: string | null;
  timeout_tunnel: string | null;
  timeout_queue: string | null;
  /** HTTP health check: `GET <check_uri>`, expecting `check_status` (null: any 2xx/3xx). */
  check_uri: string | null;
  check_status: number | null;
  /** The source lists' pattern files (`acl … src -f <file>`), relative to haproxy.cfg; core/haproxy-config/pattern-files.ts. */
  src_allow_file: string | null;
  src_deny_file: string | null;
  /**
   * The same lists space-separated, for a custom template that still puts them on the `acl` line:
   * HAProxy 2.6 reads 64 words a line, so 60 entries fit there; the files hold up to 10,000.
   */
  src_allow: string | null;
  src_deny: string | null;
  tcp: boolean;
  /** Requests per second per client address above which `rate_limit_status` is answered. */
  rate_limit: number | null;
  rate_limit_status: number | null;
  /** Parameters every server of the backend takes (its `default-server` line): maxconn, protocol, PROXY protocol. */
  server_params: string | null;
  /** A spare: it strips the leading path segments the route says (`txn.strip`, haproxy-config/route-maps.ts). */
  strip_by_route: boolean;
}

export interface ServerView {
  name: string;
  address: string;
  disabled: boolean;
  /** The health-check interval; the built-in templates set it once, in the defaults sections. */
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
  timeout_client: string | null;
  /** Space-separated CIDRs of trusted proxies that send a PROXY protocol header. */
  accept_proxy: string | null;
}

/** Backends written, reused and hashed as one range (see Renderer.backendChunks). */
const BLOCK = 64;

/** Where each backend of a render was written: bytes `starts[i]`..`ends[i]` of `slabs[i]`. */
interface Placement {
  backends: readonly Backend[];
  inter: string;
  slabs: Buffer[];
  starts: Int32Array;
  ends: Int32Array;
}

function placement(backends: readonly Backend[], inter: string, n: number): Placement {
  return { backends, inter, slabs: new Array(n), starts: new Int32Array(n), ends: new Int32Array(n) };
}

/** The repeated sections of the main template, filled in from cached per-item bytes. */
const SLOTS = ["http_rules", "http_route_maps", "https_rules", "tcp_frontends", "backends"] as const;
type Slot = (typeof SLOTS)[number];

interface MainView {
  stats_socket: string;
  hard_stop_after: string;
  server_state_file: string;
  syslog: boolean;
  https: boolean;
  /** The path `--ssl-cert` names (without `crt-list:`). */
  ssl_cert: string | null;
  /** How the bind line reads it: `crt` (a PEM file or a directory) or `crt-list`. */
  ssl_cert_keyword: "crt" | "crt-list";
  ssl_ca_cert: string | null;
  hsts_max_age: number | null;
  bind: string;
  http_port: number;
  https_port: number;
  stats_bind: string;
  stats_port: number;
  stats_user: string | null;
  /** `"${SERVICELB_STATS_PASSWORD}"`: HAProxy expands it on the node. */
  stats_password_ref: string;
  redirect: string | null;
  /** One backend per redirect status the HTTPS Services use. */
  redirects: Array<{ name: string; code: number }>;
  timeout_server: string;
  timeout_connect: string;
  timeout_client: string;
  timeout_tunnel: string;
  timeout_queue: string | null;
  /** Space-separated CIDRs of trusted proxies that send a PROXY protocol header. */
  accept_proxy: string | null;
  default_status: number;
  default_body: string | null;
  has_tcp_frontends: boolean;
  check_interval: string;
}

/**
 * True when the main template only prints each section (`{{ backends }}`), never tests or filters
 * it. Captured output could hold a printed section and be tested afterwards, so a template that
 * captures anything is never plain.
 */
function slotsArePlain(source: string): boolean {
  if (/\{%-?\s*(capture|liquid)\b/.test(source)) return false;
  return SLOTS.every((slot) => {
    const uses = source.match(new RegExp(`\\b${slot}\\b`, "g"))?.length ?? 0;
    const prints = source.match(new RegExp(`\\{\\{-?\\s*${slot}\\s*-?\\}\\}`, "g"))?.length ?? 0;
    return uses === prints;
  });
}

/** Whether the main template places a section at all: one it does not print is not rendered. */
function printsSlot(source: string, slot: Slot): boolean {
  return new RegExp(`\\b${slot}\\b`).test(source);
}

function hostCondition(h: HostMatch): string {
  return h.wildcard ? `{ var(txn.host) -m end .${h.name} }` : `{ var(txn.host) -m str ${h.name} }`;
}

/** 301, the redirect servicelb always had, keeps its backend's name, so configs stay as they were. */
function redirectBackend(code: RedirectCode): string {
  return code === 301 ? "https_redirect" : `https_redirect_${code}`;
}

/** The backend an HTTP route to an HTTPS-only Service sends plain requests to. */
export const routeRedirect = (r: HttpRoute): string => redirectBackend(r.redirectCode ?? 301);

/**
 * The backend's `default-server` parameters. Said once per backend rather than on each server
 * line, so server lines keep the one shape the agent changes at runtime (haproxy-config/server-line.ts).
 */
function serverParams(s: BackendSettings, inter: string): string | null {
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

function ruleView(r: HttpRoute): RuleView {
  const backend = r.action === "https-redirect" ? routeRedirect(r) : r.backend;
  if (r.match.kind === "host") return { backend, condition: hostCondition(r.match.host) };
  const p = r.match.prefix;
  // Segment-bound prefix: /foo and /foo/… match, /foobar does not.
  return { backend, condition: p === "/" ? "TRUE" : `{ path -m str ${p} } || { path -m beg ${p}/ }` };
}

/** Path prefixes hold only [A-Za-z0-9._~:@+=,%/-]; of those, . and + mean something to a regex. */
function prefixRegex(prefix: string): string {
  return `^${prefix.replace(/[.+]/g, (c) => `[${c}]`)}/?(.*)`;
}

const PATTERN_PATHS_BYTES = Buffer.from(PATTERN_PATHS, "utf8");
const PATTERN_SECTION_BYTES = Buffer.from(`${PATTERN_SECTION}\n`, "utf8");
const ROUTE_LOOKUP_BYTES = Buffer.from(SERVICE_MAP_REFERENCE + ROUTE_LOOKUP, "utf8");

/**
 * The HTTP frontend's routing with Gateway routes on its port: theirs first, so a request a
 * Gateway route matches goes where the route says, and the Services' routes for the rest. Every
 * `http-request` line comes before the first `use_backend`, as HAProxy evaluates them.
 */
function sharedRouteLookup(gateway: Model["gateway"]): Buffer {
  const shared = gateway?.frontends.find((f) => f.shared);
  if (!shared) return ROUTE_LOOKUP_BYTES;
  const { requests, uses } = frontendLines(shared);
  const at = ROUTE_LOOKUP.lastIndexOf("    use_backend ");
  return Buffer.from(
    SERVICE_MAP_REFERENCE + requests + ROUTE_LOOKUP.slice(0, at) + uses + ROUTE_LOOKUP.slice(at),
    "utf8",
  );
}

/** One file per list and Service: the backends of a Service's ports share its annotations, hence its lists. */
function patternFiles(model: Model): PatternFile[] {
  const files = new Map<string, readonly string[]>();
  for (const b of model.backends) {
    const { allowSources, denySources } = b.settings;
    if (allowSources) files.set(patternFilePath(b.namespace, b.service, "allow"), allowSources);
    if (denySources) files.set(patternFilePath(b.namespace, b.service, "deny"), denySources);
  }
  return [...files].map(([path, entries]) => ({ path, entries }));
}

/**
 * A backend's server lines as the backend fragment's `servers`. One per renderer, pointed at each
 * backend in turn: a fragment reads its item's fields while it renders and keeps none, so neither
 * this nor the view of its lines is allocated 10,000 times a render.
 */
class ServerLines extends Inline {
  private backend: Backend | undefined;
  private readonly view: ServerView = { name: "", address: "", disabled: false, inter: "", cookie: null };

  constructor(private readonly fragment: Fragment<ServerView>) {
    super();
  }

  /** These lines, now those of `backend`. */
  of(backend: Backend, inter: string): this {
    this.backend = backend;
    this.view.inter = inter;
    return this;
  }

  /** The view of the slot at position i. */
  private at(i: number): ServerView {
    const { view } = this;
    const { servers, cookies } = this.backend!;
    const address = servers[i]!;
    view.name = slotName(i);
    view.address = address ?? FREE_SLOT_ADDRESS;
    view.disabled = address === null;
    view.cookie = cookies === null ? null : cookies[i]!;
    return view;
  }

  write(out: ByteWriter): void {
    const n = this.backend!.servers.length;
    for (let i = 0; i < n; i++) this.fragment.write(this.at(i), out);
  }

  text(): string {
    const n = this.backend!.servers.length;
    let text = "";
    for (let i = 0; i < n; i++) text += this.fragment(this.at(i));
    return text;
  }
}

export class Renderer {
  private readonly liquid: Liquid;
  private readonly main;
  private readonly slotsArePlain: boolean;
  private readonly backend: Fragment<BackendView>;
  private readonly server: Fragment<ServerView>;
  private readonly rule: Fragment<RuleView>;
  private readonly tcp: Fragment<TcpView>;

  constructor(templates: TemplateSet) {
    // In-memory templates only: a template must not read files on the render path.
    this.liquid = new Liquid({ templates: {}, strictFilters: true, greedy: false });
    this.main = this.liquid.parse(templates.main);
    this.slotsArePlain = slotsArePlain(templates.main);
    this.printed = new Set(SLOTS.filter((slot) => printsSlot(templates.main, slot)));
    this.routesByMap = this.printed.has("http_route_maps");
    this.backend = compileFragment(this.liquid, templates.backend, "backend");
    this.server = compileFragment(this.liquid, templates.server, "server");
    this.rule = compileFragment(this.liquid, templates.httpRule, "rule");
    this.tcp = compileFragment(this.liquid, templates.tcpFrontend, "tcp");
    this.lines = new ServerLines(this.server);
  }

  private readonly lines: ServerLines;
  /** The sections the main template places. */
  private readonly printed: ReadonlySet<Slot>;
  /**
   * The main template routes HTTP by maps (it places `http_route_maps`): the maps travel in the
   * config's file section, and spare backends (backend-layout.ts) can take new Services.
   */
  readonly routesByMap: boolean;
  /** The route maps' part of the file section, while the routes are the same array. */
  private readonly mapBytes = new WeakMap<readonly HttpRoute[], Buffer>();
  private readonly serviceLines = new WeakMap<Backend, string | null>();
  private lastServiceMap: { lines: Array<string | null>; bytes: Buffer } | undefined;

  /**
   * Where each backend of the last render was written, by its position in that render's
   * backends: the model builder hands out the same objects for what did not change, so a warm
   * instance re-renders only what changed and points at the bytes of the rest. Typed arrays and
   * one array of slabs rather than an object per backend, and two sets of them used in turn (the
   * last render's and the one being written): a render leaves no per-backend garbage.
   */
  private last: Placement = placement([], "", 0);
  private spare: Placement = placement([], "", 0);
  /** Where each backend of the block being written sat in the last render (-1: not there). */
  private readonly from = new Int32Array(BLOCK);
  private readonly ruleBytes = new WeakMap<readonly HttpRoute[], Buffer>();
  private tcpBytes: { frontends: readonly TcpFrontend[]; key: string; bytes: Buffer } | undefined;
  private readonly writer = new SlabWriter();
  /** The main template split at its sections, for the last view it was rendered with (see mainParts). */
  private lastMain: { key: string; parts: Array<Buffer | Slot> } | undefined;

  /**
   * The backends' bytes, in order, as ranges of slabs, a block of BLOCK backends at a time. A block
   * whose backends are the very objects rendered before, still side by side in one range, is that
   * range again; any other block is written anew, its unchanged backends copied from where they
   * sat. So every block is one range, and the config at most a chunk per block however many
   * renders a warm instance has made (a range per changed backend would split it into ever more
   * pieces, each one more step for the hash and the upload).
   *
   * Both lists are sorted by name (the model builder sorts them), so old and new are walked side by
   * side; a backend is reused only when it is the very object rendered before, so an unsorted list
   * costs re-renders, never wrong bytes.
   */
  private backendChunks(backends: readonly Backend[], inter: string, out: ChunkList): void {
    const before = this.last.inter === inter ? this.last : undefined;
    const n = backends.length;
    const next = this.spare.slabs.length === n ? this.spare : placement(backends, inter, n);
    const { slabs, starts, ends } = next;
    const from = this.from;
    let j = 0;
    for (let first = 0; first < n; first += BLOCK) {
      const stop = Math.min(n, first + BLOCK);
      // Whether the block is one range of the last render, as it was.
      let whole = before !== undefined;
      for (let i = first; i < stop; i++) {
        const b = backends[i]!;
        let at = -1;
        if (before) {
          const old = before.backends;
          // Names are compared only where the lists part: most backends sit where they sat.
          if (old[j] !== b) while (j < old.length && old[j]!.name < b.name) j++;
          if (j < old.length && old[j] === b) at = j++;
        }
        from[i - first] = at;
        if (at < 0) whole = false;
        else if (whole && i > first) {
          const prev = from[i - first - 1]!;
          whole = before!.slabs[at] === before!.slabs[prev] && before!.starts[at] === before!.ends[prev];
        }
      }
      if (whole) {
        for (let i = first; i < stop; i++) {
          const at = from[i - first]!;
          slabs[i] = before!.slabs[at]!;
          starts[i] = before!.starts[at]!;
          ends[i] = before!.ends[at]!;
        }
        out.add(slabs[first]!, starts[first]!, ends[stop - 1]!);
        continue;
      }
      // Offsets within the block while it is written: a new slab may move it on the way.
      this.writer.begin();
      for (let i = first; i < stop; i++) {
        const at = from[i - first]!;
        starts[i] = this.writer.written();
        if (at >= 0) this.writer.range(before!.slabs[at]!, before!.starts[at]!, before!.ends[at]!);
        else this.backend.write(this.backendView(backends[i]!, inter), this.writer);
        ends[i] = this.writer.written();
      }
      const slab = this.writer.end();
      const base = this.writer.start;
      for (let i = first; i < stop; i++) {
        slabs[i] = slab;
        starts[i] = starts[i]! + base;
        ends[i] = ends[i]! + base;
      }
      out.add(slab, base, this.writer.stop);
    }
    next.backends = backends;
    next.inter = inter;
    // Kept for its arrays only: not the backends of two renders ago.
    this.last.backends = [];
    this.spare = this.last;
    this.last = next;
  }

  /** The same chunk while the frontends are the same objects: a warm render hashes from its first new chunk on. */
  private tcpChunk(frontends: readonly TcpFrontend[], bind: string, acceptProxy: string | null): Buffer {
    const key = `${bind} ${acceptProxy}`;
    const cached = this.tcpBytes;
    if (cached?.frontends === frontends && cached.key === key) return cached.bytes;
    this.writer.begin();
    for (const t of frontends)
      this.tcp.write(
        {
          name: t.name,
          bind,
          port: t.port,
          backend: t.backend,
          timeout_client: t.timeoutClient,
          accept_proxy: acceptProxy,
        },
        this.writer,
      );
    const bytes = this.writer.end().subarray(this.writer.start, this.writer.stop);
    this.tcpBytes = { frontends, key, bytes };
    return bytes;
  }

  private rulesChunk(routes: readonly HttpRoute[]): Buffer {
    let bytes = this.ruleBytes.get(routes);
    if (bytes === undefined) {
      this.writer.begin();
      for (const r of routes) this.rule.write(ruleView(r), this.writer);
      bytes = this.writer.end().subarray(this.writer.start, this.writer.stop);
      this.ruleBytes.set(routes, bytes);
    }
    return bytes;
  }

  private backendView(b: Backend, inter: string): BackendView {
    const s = b.settings;
    return {
      name: b.name,
      defaults: b.mode === "tcp" ? "tcp_defaults" : "http_defaults",
      algorithm: b.algorithm,
      stick_expire: b.affinity.kind === "source" ? `${b.affinity.timeoutSeconds}s` : null,
      cookie: b.affinity.kind === "cookie",
      strip_regex: b.strip ? prefixRegex(b.strip.prefix) : null,
      strip_prefix: b.strip ? b.strip.prefix : null,
      strip_unless: b.strip?.unlessHost ? hostCondition(b.strip.unlessHost) : null,
      servers: this.lines.of(b, inter),
      namespace: b.namespace,
      service: b.service,
      port: b.servicePort,
      timeout_server: s.timeoutServer,
      timeout_connect: s.timeoutConnect,
      timeout_tunnel: s.timeoutTunnel,
      timeout_queue: s.timeoutQueue,
      check_uri: s.checkHttp?.uri ?? null,
      check_status: s.checkHttp?.status ?? null,
      src_allow_file: s.allowSources ? patternFilePath(b.namespace, b.service, "allow") : null,
      src_deny_file: s.denySources ? patternFilePath(b.namespace, b.service, "deny") : null,
      src_allow: s.allowSources?.join(" ") ?? null,
      src_deny: s.denySources?.join(" ") ?? null,
      tcp: b.mode === "tcp",
      rate_limit: s.rateLimit?.rps ?? null,
      rate_limit_status: s.rateLimit?.status ?? null,
      server_params: serverParams(s, inter),
      strip_by_route: b.stripByRoute === true,
    };
  }

  private mapChunk(routes: readonly HttpRoute[]): Buffer {
    let bytes = this.mapBytes.get(routes);
    if (bytes === undefined) {
      const files = [...routeMapLines(routes, routeRedirect)].map(([path, entries]) => ({ path, entries }));
      bytes = Buffer.from(renderPatternFiles(files), "utf8");
      this.mapBytes.set(routes, bytes);
    }
    return bytes;
  }

  /**
   * The Service map's section, made anew only when a backend's name or Service changed: a change
   * of endpoints alone makes new backend objects, and must not cost a map of every backend.
   */
  private serviceMapChunk(backends: readonly Backend[]): Buffer {
    const lines = backends.map((b) => {
      let line = this.serviceLines.get(b);
      if (line === undefined) {
        line = serviceMapLine(b);
        this.serviceLines.set(b, line);
      }
      return line;
    });
    const last = this.lastServiceMap;
    if (last && last.lines.length === lines.length && last.lines.every((l, i) => l === lines[i])) return last.bytes;
    const entries = lines.filter((l): l is string => l !== null).sort(compareStrings);
    const bytes = Buffer.from(renderPatternFiles([{ path: SERVICE_MAP, entries }]), "utf8");
    this.lastServiceMap = { lines, bytes };
    return bytes;
  }

  /**
   * The main template's output split where the repeated sections go. It depends on the options
   * and the default page only, so a warm instance renders it once. A custom main template that
   * does more with a section than print it gets the sections as text instead.
   */
  private mainParts(view: MainView): Array<Buffer | Slot> | null {
    if (!this.slotsArePlain) return null;
    const key = JSON.stringify(view);
    if (this.lastMain?.key === key) return this.lastMain.parts;
    const slots = Object.fromEntries(SLOTS.map((slot, i) => [slot, `\u0000${i}\u0000`]));
    const text = this.liquid.renderSync(this.main, { o: view, ...slots }) as string;
    const parts: Array<Buffer | Slot> = [];
    for (const [i, piece] of text.split(/\u0000(\d)\u0000/).entries()) {
      parts.push(i % 2 === 1 ? SLOTS[Number(piece)]! : Buffer.from(piece, "utf8"));
    }
    this.lastMain = { key, parts };
    return parts;
  }

  /** The config text; for tests and tools that read it. The pipeline uses the chunks. */
  render(model: Model): string {
    return this.renderBytes(model).toString("utf8");
  }

  /** The config in one buffer: one copy of every chunk, for callers that need it whole. */
  renderBytes(model: Model): Buffer {
    const { chunks, byteLength } = this.renderChunks(model);
    return Buffer.concat(chunks, byteLength);
  }

  /**
   * The config as a list of chunks, mostly ranges of large slabs: nothing is joined, so a render
   * costs no copy of the whole config, and a warm render after a small change writes only the
   * changed backends' bytes.
   */
  renderChunks(model: Model): ConfigChunks {
    const o = model.options;
    const https = o.sslCert !== undefined;
    const codes = new Set<RedirectCode>();
    if (https) for (const r of model.httpRoutes) if (r.action === "https-redirect") codes.add(r.redirectCode ?? 301);
    const { status, body } = model.defaultPage;
    const bodyless = status === 204 || status === 304;
    const view: MainView = {
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
    const files = patternFiles(model);
    const maps = this.routesByMap ? this.mapChunk(model.httpRoutes) : null;
    const section = (slot: Slot, chunks: ChunkList): void => {
      if (!this.printed.has(slot)) return;
      if (slot === "backends") {
        // A template that routes by maps reads its files beside itself from before the frontend on.
        if (files.length > 0 && !this.routesByMap) chunks.push(PATTERN_PATHS_BYTES);
        if (model.gateway) chunks.push(Buffer.from(gatewaySection(model.gateway, view.bind), "utf8"));
        this.backendChunks(model.backends, o.checkInterval, chunks);
      } else if (slot === "tcp_frontends") {
        chunks.push(this.tcpChunk(model.tcpFrontends, view.bind, view.accept_proxy));
      } else if (slot === "http_route_maps") {
        chunks.push(model.gateway ? sharedRouteLookup(model.gateway) : ROUTE_LOOKUP_BYTES);
      } else {
        chunks.push(this.rulesChunk(slot === "http_rules" ? model.httpRoutes : model.httpsRoutes));
      }
    };
    // Last, so that a list's length never shifts the lines the agent's slot diff compares. The
    // maps sort before the pattern files ("maps/" < "patterns/"), and backends.map before the
    // route maps. The Service map goes with the route maps: it needs the frontend they are
    // looked up in (SERVICE_MAP_REFERENCE).
    const fileSection = (chunks: ChunkList): void => {
      if (files.length === 0 && maps === null) return;
      chunks.push(PATTERN_SECTION_BYTES);
      if (maps !== null) {
        chunks.push(this.serviceMapChunk(model.backends));
        chunks.push(maps);
      }
      if (files.length > 0) chunks.push(Buffer.from(renderPatternFiles(files), "utf8"));
    };
    const parts = this.mainParts(view);
    if (parts === null) {
      const sections: Record<string, string> = {};
      for (const slot of SLOTS) {
        const list = new ChunkList();
        section(slot, list);
        sections[slot] = Buffer.concat(list.chunks, list.byteLength).toString("utf8");
      }
      const text = this.liquid.renderSync(this.main, { o: view, ...sections }) as string;
      const list = new ChunkList();
      list.push(Buffer.from(text, "utf8"));
      fileSection(list);
      const whole = Buffer.concat(list.chunks, list.byteLength);
      return { chunks: [whole], byteLength: whole.length };
    }
    const list = new ChunkList();
    for (const part of parts) {
      if (typeof part === "string") section(part, list);
      else list.push(part);
    }
    fileSection(list);
    return list;
  }
}
