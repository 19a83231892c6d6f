/*
 * bench/render: full renders of synthetic clusters (N HTTP services × 10 endpoints) against the
 * Go text/template anchor, in one run. Each case runs in its own process so peak RSS is its own.
 * The anchor is bench/anchors/go-render (bench/go-anchor.ts): the original service-loadbalancer's
 * template under Go's text/template, over the same cluster. The bench builds it with the `go` on
 * PATH (Go 1.19 or later: `apt-get install -y golang-go`); without Go it says so in a NOTE line
 * and runs servicelb's cases alone, with no ratios.
 *   node dist/dev/bench/render.js [--json] [--sizes 1000,10000,50000] [--rounds 5] [--iters N]
 *     [--anchor DIR]   another anchor folder (default bench/anchors/go-render)
 *     [--warm]         the warm cases only, once per round (no full renders, no anchor)
 *     [--changes 200]  timed changes of the warm cases: a long-lived instance has made many
 *     [--warm-up 30]   untimed changes before them: the JIT compiles the warm path over the first
 *                      few dozen (they take up to 4× as long), which a serving instance is past
 * The warm case runs once per digest kind (core/publish/config-digest.ts), side by side: sha256, which
 * agents of every version verify, and tree1, which publishers switch to once every agent does.
 * The cases run from dist/bench/render.mjs, this file bundled as the functions are (build:dev,
 * rolldown.config.mjs), because a deployed function loads its bundle; one more case per round runs
 * the same render from the modules in dist/dev, for the memory that loading them costs.
 */
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { GCProfiler } from "node:v8";
import { buildModel } from "../shared/core/model/build-model.js";
import { ModelCache } from "../shared/core/model/model-cache.js";
import { parseRenderOptions, type RenderOptions } from "../shared/core/settings/options.js";
import { renderSnapshot } from "../shared/core/render/pipeline.js";
import { LayoutState } from "../shared/core/model/layout-record.js";
import { Renderer } from "../shared/core/render/render.js";
import type { TemplateSet } from "../shared/core/render/template-views.js";
import { configHasher, DIGEST, type DigestKind } from "../shared/core/publish/config-digest.js";
import type { Snapshot } from "../shared/core/kubernetes/snapshot.js";
import { loadTemplates, packageRoot } from "../shared/adapters/templates.js";
import {
  buildGoAnchor,
  clusterFile,
  GO_ANCHOR_DIR,
  GO_ENGINE,
  type GoAnchor,
  gnuTimeMissing,
  runGoAnchor,
} from "./go-anchor.js";
import { machine, mib, percentile, table } from "./machine.js";
import { syntheticSnapshot } from "./synthetic.js";

interface CaseResult {
  engine: string;
  services: number;
  endpoints: number;
  parseMs: number;
  buildMs: number;
  msPerRender: number;
  /**
   * CPU time per render (every thread of the process: the collector's too), which a busy machine
   * inflates far less than wall time. NaN where it was not measured.
   */
  cpuMsPerRender: number;
  bytes: number;
  peakRssMiB: number;
  /** Warm case: how many changes it timed, after how many untimed ones. */
  changes?: number;
  warmUp?: number;
  /** Warm case: build + render + digest per change, p50, p99 (nearest rank) and max. */
  totalMs?: Spread;
  /** Warm case: the same in CPU time (every thread of the process), which waiting for a core does not count. */
  totalCpuMs?: Spread;
  /**
   * Warm case: the same passes by stage (each stage's own p50 and p99, so they do not add up to
   * the total's), the collector's pauses within a pass, and the chunks the config was left in.
   */
  stagesMs?: { build: Spread; render: Spread; digest: Spread; gc: Spread };
  chunks?: Spread;
}

interface Spread {
  p50: number;
  p99: number;
  max: number;
}

const spreadOf = (xs: number[]): Spread => ({
  p50: round2(percentile(xs, 50)),
  p99: round2(percentile(xs, 99)),
  max: round2(Math.max(...xs)),
});

const ENDPOINTS = 10;
const REVISION = 1000;

/** The same templates with every fragment made non-plain, so liquidjs renders each item itself. */
function naive(t: TemplateSet): TemplateSet {
  const slow = (s: string) => `${s}{{ "" }}`;
  return {
    ...t,
    backend: slow(t.backend),
    server: slow(t.server),
    httpRule: slow(t.httpRule),
    tcpFrontend: slow(t.tcpFrontend),
  };
}

function runCase(services: number, engine: string, iters: number, warmUp: number): CaseResult {
  const t0 = performance.now();
  const snapshot = syntheticSnapshot(services, ENDPOINTS, REVISION, engine === SETTINGS);
  const t1 = performance.now();
  // Loopback-free options as the anchor renders: one HTTP frontend, default algorithm.
  const options = parseRenderOptions({ minServerSlots: 1 });
  const warm = WARM.find((w) => w.engine === engine);
  if (warm) return warmReRender(services, snapshot, options, { iters, warmUp }, Math.round(t1 - t0), warm);
  const model = buildModel(snapshot, options);
  const t2 = performance.now();
  const templates = engine === "liquid-per-item" ? naive(loadTemplates()) : loadTemplates();
  const bytes = new Renderer(templates).renderChunks(model).byteLength;
  // A new renderer for every render, as the anchor parses its template every time: a renderer
  // remembers where it wrote the backends it has rendered, which is the warm case measured below.
  const times: number[] = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < iters; i++) {
    const start = performance.now();
    new Renderer(templates).renderChunks(model);
    times.push(performance.now() - start);
  }
  const used = process.cpuUsage(cpu);
  return {
    engine,
    services,
    endpoints: ENDPOINTS,
    parseMs: Math.round(t1 - t0),
    buildMs: Math.round(t2 - t1),
    msPerRender: round1(median(times)),
    cpuMsPerRender: round1((used.user + used.system) / 1000 / iters),
    bytes,
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
  };
}

const WARM: ReadonlyArray<{ engine: string; digest: DigestKind }> = [
  { engine: "servicelb warm, 1 Service changed, sha256", digest: "sha256" },
  { engine: "servicelb warm, 1 Service changed, tree1", digest: "tree1" },
];
const isWarm = (engine: string) => WARM.some((w) => w.engine === engine);
/** The same cluster with a mix of per-Service settings (more config than the anchor renders). */
const SETTINGS = "servicelb, per-Service settings mix";
/** The "servicelb" case run from the modules rather than the bundle. */
const MODULES = "servicelb, from dist/dev modules";
/** Changes of the warm case, unless --changes and --warm-up say otherwise. */
const WARM_CHANGES = 200;
const WARM_UP_CHANGES = 30;

const round1 = (x: number) => Math.round(x * 10) / 10;
const round2 = (x: number) => Math.round(x * 100) / 100;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length;

/**
 * A warm function instance re-rendering after one Service changed (its EndpointSlice moved a
 * pod, so its resourceVersion went up): model build, render and digest, with the instance's
 * caches, as a reconcile pass does them. The snapshot is the live kind (trusted resourceVersions);
 * validating it is part of the list stage.
 */
function warmReRender(
  services: number,
  snapshot: Snapshot,
  options: RenderOptions,
  { iters, warmUp }: { iters: number; warmUp: number },
  parseMs: number,
  warm: { engine: string; digest: DigestKind },
): CaseResult {
  const renderer = new Renderer(loadTemplates());
  const cache = new ModelCache();
  const hasher = configHasher(warm.digest);
  // A warm instance keeps its backend layout too (RenderContext): placement reuses it.
  const layout = new LayoutState();
  let current: Snapshot = { ...snapshot, trustedRevisions: true };
  const first = renderSnapshot(current, options, renderer, {}, cache, hasher, layout);
  let bytes = first.byteLength;
  if (!DIGEST.test(first.sha256)) throw new Error("no digest");
  const totals: number[] = [];
  const cpuTotals: number[] = [];
  const builds: number[] = [];
  const renders: number[] = [];
  const hashes: number[] = [];
  const pauses: number[] = [];
  const chunks: number[] = [];
  // The collector's pauses are read per pass: a pass's own garbage, and the bench's, are collected
  // in whichever pass the young generation fills up.
  const gc = new GCProfiler();
  for (let i = 0; i < warmUp + iters; i++) {
    const k = (i * 7919) % current.endpointSlices.length;
    const slices = [...current.endpointSlices];
    const old = slices[k]!;
    slices[k] = {
      ...old,
      metadata: { ...old.metadata, resourceVersion: String(100_000 + i) },
      readyAddresses: [...old.readyAddresses.slice(1), `10.255.${i % 256}.${k % 256}`],
    };
    current = { ...current, endpointSlices: slices };
    gc.start();
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    const result = renderSnapshot(current, options, renderer, {}, cache, hasher, layout);
    const t1 = performance.now();
    if (!DIGEST.test(result.sha256)) throw new Error("no digest");
    const t2 = performance.now();
    const used = process.cpuUsage(cpu);
    const collected = gc.stop();
    bytes = result.byteLength;
    if (i < warmUp) continue;
    totals.push(t2 - t0);
    cpuTotals.push((used.user + used.system) / 1000);
    builds.push(result.stats.buildMs);
    renders.push(result.stats.renderMs);
    hashes.push(t2 - t1);
    pauses.push((collected?.statistics ?? []).reduce((sum, g) => sum + g.cost, 0) / 1000);
    chunks.push(result.chunks.length);
  }
  return {
    engine: warm.engine,
    services,
    endpoints: ENDPOINTS,
    parseMs,
    buildMs: round1(mean(builds)),
    msPerRender: round1(mean(renders)),
    cpuMsPerRender: Number.NaN,
    bytes,
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
    changes: iters,
    warmUp,
    totalMs: spreadOf(totals),
    totalCpuMs: spreadOf(cpuTotals),
    stagesMs: { build: spreadOf(builds), render: spreadOf(renders), digest: spreadOf(hashes), gc: spreadOf(pauses) },
    chunks: spreadOf(chunks),
  };
}

function goCase(anchor: GoAnchor, services: number, iters: number): CaseResult {
  const r = runGoAnchor(anchor, clusterFile(anchor, services, ENDPOINTS, REVISION), iters);
  if (r.services !== services || r.endpoints !== ENDPOINTS)
    throw new Error(`the Go anchor read ${r.services} × ${r.endpoints}, not ${services} × ${ENDPOINTS}`);
  return { engine: GO_ENGINE, parseMs: 0, buildMs: 0, ...r };
}

/** Timed renders per case: enough at small sizes for the JIT to settle, fewer where one render takes long. */
function defaultIters(services: number): number {
  return services <= 1000 ? 20 : services <= 10_000 ? 10 : 5;
}

function loadLine(): string {
  const [one, five] = loadavg();
  return `load average ${one!.toFixed(2)} (1 min), ${five!.toFixed(2)} (5 min) on ${cpus().length} cores`;
}

function main(): void {
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const child = arg("--child");
  if (child) {
    process.stdout.write(
      JSON.stringify(
        runCase(
          Number(child),
          arg("--engine") ?? "servicelb",
          Number(arg("--iters") ?? 5),
          Number(arg("--warm-up") ?? WARM_UP_CHANGES),
        ),
      ),
    );
    return;
  }
  const sizes = (arg("--sizes") ?? "1000,10000,50000").split(",").map(Number);
  // Two cores, and Go's collector runs beside its renderer: one pair of runs can mislead, so the
  // engines take turns for several rounds and the ratio reported is the median of the rounds.
  const rounds = Number(arg("--rounds") ?? 5);
  const anchorDir = resolve(arg("--anchor") ?? GO_ANCHOR_DIR);
  const self = fileURLToPath(import.meta.url);
  // The bundle is only as new as the last build:dev; one older than this file is not run.
  const bundled = join(packageRoot(), "dist", "bench", "render.mjs");
  const bundle = existsSync(bundled) && statSync(bundled).mtimeMs >= statSync(self).mtimeMs ? bundled : undefined;
  const json = args.includes("--json");
  const warmOnly = args.includes("--warm");
  const changes = Number(arg("--changes") ?? WARM_CHANGES);
  const warmUp = Number(arg("--warm-up") ?? WARM_UP_CHANGES);
  const anchor = warmOnly ? "--warm: the warm cases only, no anchor" : buildGoAnchor(anchorDir);
  const notes: string[] = [];
  if (!bundle)
    notes.push(`${bundled} missing or older than ${self} (npm run build:dev): every case runs from dist/dev`);
  if (typeof anchor === "string") notes.push(anchor);
  else if (gnuTimeMissing())
    notes.push("/usr/bin/time not found (apt-get install -y time): Go's peak RSS and CPU time are not measured");
  if (!json) {
    console.log(`bench/render — ${machine()}`);
    console.log(
      `full render of N HTTP services × ${ENDPOINTS} endpoints (model built beforehand, as the anchor does); ms/render is the median of the timed renders after one warm-up; cases from ${bundle ?? self}; Go anchor: ${typeof anchor !== "string" ? anchorDir : warmOnly ? "not run" : "MISSING"}`,
    );
    for (const n of notes) console.log(`NOTE: ${n}`);
  }
  const sections: Array<{ services: number; iters: number; loadBefore: string; loadAfter: string; results: Row[] }> =
    [];
  for (const n of sizes) {
    const iters = Number(arg("--iters") ?? defaultIters(n));
    const loadBefore = loadLine();
    const results: Row[] = [];
    for (let round = 1; round <= rounds; round++) {
      const warm = WARM.map((w) => w.engine);
      const engines = warmOnly
        ? warm
        : round === 1
          ? ["servicelb", MODULES, SETTINGS, "liquid-per-item", ...warm]
          : ["servicelb", MODULES, SETTINGS];
      for (const engine of engines) {
        // liquidjs for every item takes seconds at 10,000 Services and minutes at 50,000.
        if (engine === "liquid-per-item" && n > 10_000) continue;
        const caseIters = engine === "liquid-per-item" ? 1 : isWarm(engine) ? changes : iters;
        const out = execFileSync(
          process.execPath,
          [
            engine === MODULES || !bundle ? self : bundle,
            "--child",
            String(n),
            "--engine",
            engine,
            "--iters",
            String(caseIters),
            "--warm-up",
            String(warmUp),
          ],
          { encoding: "utf8", maxBuffer: 1 << 20 },
        );
        results.push({ ...(JSON.parse(out) as CaseResult), round });
      }
      if (typeof anchor !== "string") results.push({ ...goCase(anchor, n, iters), round });
    }
    const section = { services: n, iters, loadBefore, loadAfter: loadLine(), results };
    sections.push(section);
    if (!json) printSection(section, rounds);
  }
  if (json)
    process.stdout.write(
      `${JSON.stringify({ machine: machine(), rounds, anchor: anchorDir, notes, sections }, null, 2)}\n`,
    );
}

type Row = CaseResult & { round: number };

/** NaN travels from a case's process as null. */
const measured = (x: number | null) => x !== null && !Number.isNaN(x);

function printSection(
  s: { services: number; iters: number; loadBefore: string; loadAfter: string; results: Row[] },
  rounds: number,
): void {
  const go = (r: Row) =>
    s.results.find((g) => g.round === r.round && g.engine.startsWith("go") && g !== r && !r.engine.startsWith("go"));
  const ratio = (r: Row) => {
    const g = go(r);
    return g ? `${(r.msPerRender / g.msPerRender).toFixed(2)}×` : "-";
  };
  const cpuRatio = (r: Row) => {
    const g = go(r);
    return g && measured(r.cpuMsPerRender) && g.cpuMsPerRender > 0
      ? `${(r.cpuMsPerRender / g.cpuMsPerRender).toFixed(2)}×`
      : "-";
  };
  console.log(`\n${s.services} services, ${s.iters} timed renders per case, ${rounds} rounds; before: ${s.loadBefore}`);
  console.log(
    table(
      [
        "round",
        "engine",
        "validate ms",
        "build ms",
        "ms/render",
        "vs Go",
        "CPU ms/render",
        "CPU vs Go",
        "config bytes",
        "peak RSS MiB",
      ],
      s.results.map((r) => [
        r.round,
        r.engine,
        r.parseMs || "-",
        r.buildMs || "-",
        r.msPerRender,
        ratio(r),
        measured(r.cpuMsPerRender) ? r.cpuMsPerRender : "-",
        cpuRatio(r),
        r.bytes,
        Number.isNaN(r.peakRssMiB) ? "-" : r.peakRssMiB,
      ]),
    ),
  );
  const spread = (engine: string) => {
    const xs = s.results.filter((r) => r.engine === engine).map((r) => r.msPerRender);
    return xs.length > 0 ? `${Math.min(...xs)} / ${median(xs)} / ${Math.max(...xs)} ms` : "-";
  };
  const rss = (engine: string) => {
    const xs = s.results.filter((r) => r.engine === engine && !Number.isNaN(r.peakRssMiB)).map((r) => r.peakRssMiB);
    return xs.length > 0 ? `${median(xs)} MiB` : "-";
  };
  const ratios = (engine: string, of: (r: Row) => number) =>
    s.results
      .filter((r) => r.engine === engine && go(r) && measured(of(r)) && of(go(r)!) > 0)
      .map((r) => of(r) / of(go(r)!));
  const listed = (xs: number[]) => `${median(xs).toFixed(2)}× (rounds: ${xs.map((x) => x.toFixed(2)).join(", ")})`;
  for (const engine of [GO_ENGINE, "servicelb", MODULES, SETTINGS]) {
    if (!s.results.some((r) => r.engine === engine)) continue;
    const wall = ratios(engine, (r) => r.msPerRender);
    const cpu = ratios(engine, (r) => r.cpuMsPerRender);
    console.log(
      `${engine}: min / median / max ${spread(engine)}, median peak RSS ${rss(engine)}${wall.length > 0 ? `; vs Go, median of ${wall.length} rounds: ${listed(wall)}; CPU time vs Go: ${cpu.length > 0 ? listed(cpu) : "-"}` : ""}`,
    );
  }
  const at = (x: Spread) => `${x.p50} / ${x.p99}`;
  for (const r of s.results) {
    if (r.totalMs)
      console.log(
        `${r.engine}: build + render + digest ${r.totalMs.p50} ms p50, ${r.totalMs.p99} ms p99, ${r.totalMs.max} ms max over ${r.changes} changes after ${r.warmUp} untimed`,
      );
    if (r.totalCpuMs)
      console.log(
        `  CPU time ${r.totalCpuMs.p50} ms p50, ${r.totalCpuMs.p99} ms p99, ${r.totalCpuMs.max} ms max (every thread)`,
      );
    if (r.stagesMs && r.chunks)
      console.log(
        `  by stage, ms p50 / p99: build ${at(r.stagesMs.build)}, render ${at(r.stagesMs.render)}, digest ${at(r.stagesMs.digest)}, GC pauses ${at(r.stagesMs.gc)}; chunks ${at(r.chunks)} (max ${r.chunks.max})`,
      );
  }
  console.log(`after: ${s.loadAfter}`);
}

main();
