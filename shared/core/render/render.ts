/*
 * The renderer: a model into the bytes of haproxy.cfg and its map and pattern files, through the
 * templates (template-views.ts says what each sees), each backend's and route list's bytes kept
 * and reused while its object stays the same, so a render costs what changed.
 */

import type { Liquid } from "liquidjs";
import { ChunkList, type ConfigChunks, SlabWriter } from "../publish/chunks.js";
import type { Fragment } from "./fragment.js";
import { gatewaySection } from "../gateway/render.js";
import { gatewayMaps, mapFrontendLines } from "../gateway/render-maps.js";
import type { Backend, HttpRoute, Model, TcpFrontend } from "../model/model.js";
import { patternFilePath, renderPatternFiles } from "../haproxy-config/pattern-files.js";
import { compareStrings } from "../compare.js";
import { routeMapLines } from "../haproxy-config/route-maps.js";
import { SERVICE_MAP, serviceMapLine } from "../haproxy-config/service-map.js";
import {
  hostCondition,
  PATTERN_PATHS_BYTES,
  PATTERN_SECTION_BYTES,
  patternFiles,
  prefixRegex,
  mainView,
  ROUTE_LOOKUP_BYTES,
  routeRedirect,
  ruleView,
  serverParams,
  sharedRouteLookup,
} from "./model-views.js";
import { ServerLines } from "./server-lines.js";
import { compileTemplates } from "./compiled-templates.js";
import {
  type BackendView,
  type MainView,
  type RuleView,
  type ServerView,
  type Slot,
  SLOTS,
  type TcpView,
  type TemplateSet,
} from "./template-views.js";

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

export class Renderer {
  private readonly liquid: Liquid;
  private readonly main;
  private readonly slotsArePlain: boolean;
  private readonly backend: Fragment<BackendView>;
  private readonly server: Fragment<ServerView>;
  private readonly rule: Fragment<RuleView>;
  private readonly tcp: Fragment<TcpView>;

  constructor(templates: TemplateSet) {
    const compiled = compileTemplates(templates);
    this.liquid = compiled.liquid;
    this.main = compiled.main;
    this.slotsArePlain = compiled.slotsArePlain;
    this.printed = compiled.printed;
    this.routesByMap = this.printed.has("http_route_maps");
    this.backend = compiled.backend;
    this.server = compiled.server;
    this.rule = compiled.rule;
    this.tcp = compiled.tcp;
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
    const view = mainView(model);
    const files = patternFiles(model);
    const maps = this.routesByMap ? this.mapChunk(model.httpRoutes) : null;
    // The Gateway's weights and match maps travel with the route maps: a template without them
    // writes every match and threshold into lines.
    const gwMaps = model.gateway && this.routesByMap ? gatewayMaps(model.gateway) : undefined;
    const section = (slot: Slot, chunks: ChunkList): void => {
      if (!this.printed.has(slot)) return;
      if (slot === "backends") {
        // A template that routes by maps reads its files beside itself from before the frontend on.
        if (files.length > 0 && !this.routesByMap) chunks.push(PATTERN_PATHS_BYTES);
        if (model.gateway)
          chunks.push(
            Buffer.from(
              gatewaySection(model.gateway, view.bind, gwMaps && ((f) => mapFrontendLines(f, gwMaps))),
              "utf8",
            ),
          );
        this.backendChunks(model.backends, o.checkInterval, chunks);
      } else if (slot === "tcp_frontends") {
        chunks.push(this.tcpChunk(model.tcpFrontends, view.bind, view.accept_proxy));
      } else if (slot === "http_route_maps") {
        chunks.push(model.gateway ? sharedRouteLookup(model.gateway, gwMaps) : ROUTE_LOOKUP_BYTES);
      } else {
        chunks.push(this.rulesChunk(slot === "http_rules" ? model.httpRoutes : model.httpsRoutes));
      }
    };
    // Last, so that a list's length never shifts the lines the agent's slot diff compares. The
    // maps sort before the pattern files ("maps/" < "patterns/"), and backends.map,
    // gateway.weights.map and the Gateway's match maps (gw.<port>.*) before the route maps: the
    // agent swaps them in this order, a rule's weights before the matches that lead to it. The Service map goes with the route maps: it needs the frontend they are
    // looked up in (SERVICE_MAP_REFERENCE).
    const fileSection = (chunks: ChunkList): void => {
      if (files.length === 0 && maps === null) return;
      chunks.push(PATTERN_SECTION_BYTES);
      if (maps !== null) {
        chunks.push(this.serviceMapChunk(model.backends));
        if (gwMaps && gwMaps.files.length > 0) chunks.push(Buffer.from(renderPatternFiles(gwMaps.files), "utf8"));
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
