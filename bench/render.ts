import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildModel, ModelCache } from "../shared/core/build-model.js";
import { parseRenderOptions, type RenderOptions } from "../shared/core/options.js";
import { renderSnapshot } from "../shared/core/pipeline.js";
import { Renderer, type TemplateSet } from "../shared/core/render.js";
import { parseSnapshot, type Snapshot } from "../shared/core/snapshot.js";
import { loadTemplates, packageRoot } from "../shared/adapters/templates.js";
import { machine, mib, percentile, table } from "./machine.js";
import { syntheticCluster } from "./synthetic.js";

/**
 * bench/render: full renders of synthetic clusters (N HTTP services × 10 endpoints) against the
 * Go text/template anchor, in one run. Each case runs in its own process so peak RSS is its own.
 *   node dist/dev/bench/render.js [--json] [--sizes 1000,10000] [--iters 5]
 */
interface CaseResult {
  engine: string;
  services: number;
  endpoints: number;
  parseMs: number;
  buildMs: number;
  msPerRender: number;
  bytes: number;
  peakRssMiB: number;
  /** Warm case: build + render per change, p50 and p99 (nearest rank). */
  totalMs?: { p50: number; p99: number };
}

const ENDPOINTS = 10;

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

function runCase(services: number, engine: string, iters: number): CaseResult {
  const text = JSON.stringify(syntheticCluster(services, ENDPOINTS, 1000, engine === SETTINGS));
  const t0 = performance.now();
  const snapshot = parseSnapshot(text);
  const t1 = performance.now();
  // Loopback-free options as the anchor renders: one HTTP frontend, default algorithm.
  const options = parseRenderOptions({ minServerSlots: 1 });
  const model = buildModel(snapshot, options);
  const t2 = performance.now();
  if (engine === WARM) return warmReRender(services, snapshot, options, iters, Math.round(t1 - t0));
  const templates = engine === "liquid-per-item" ? naive(loadTemplates()) : loadTemplates();
  const bytes = new Renderer(templates).renderBytes(model).length;
  // A new renderer for every render, as the anchor parses its template every time: a renderer
  // remembers the text of the backends it has rendered, which is the warm case measured below.
  const start = performance.now();
  for (let i = 0; i < iters; i++) new Renderer(templates).renderBytes(model);
  const msPerRender = (performance.now() - start) / iters;
  return {
    engine,
    services,
    endpoints: ENDPOINTS,
    parseMs: Math.round(t1 - t0),
    buildMs: Math.round(t2 - t1),
    msPerRender: Math.round(msPerRender * 10) / 10,
    bytes,
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
  };
}

const WARM = "servicelb warm, 1 Service changed";
/** The same cluster with a mix of per-Service settings (more config than the anchor renders). */
const SETTINGS = "servicelb, per-Service settings mix";

/**
 * A warm function instance re-rendering after one Service changed (its EndpointSlice moved a
 * pod, so its resourceVersion went up): model build and render to bytes, with the instance's
 * caches. The snapshot is the live kind (trusted resourceVersions); parsing it is part of the
 * list stage.
 */
function warmReRender(
  services: number,
  snapshot: Snapshot,
  options: RenderOptions,
  iters: number,
  parseMs: number,
): CaseResult {
  const renderer = new Renderer(loadTemplates());
  const cache = new ModelCache();
  let current: Snapshot = { ...snapshot, trustedRevisions: true };
  let bytes = renderSnapshot(current, options, renderer, {}, cache).bytes.length;
  let build = 0;
  let render = 0;
  const totals: number[] = [];
  for (let i = 0; i < iters; i++) {
    const k = (i * 7919) % current.endpointSlices.length;
    const slices = [...current.endpointSlices];
    const old = slices[k]!;
    slices[k] = {
      ...old,
      metadata: { ...old.metadata, resourceVersion: String(100_000 + i) },
      endpoints: [
        ...old.endpoints.slice(1),
        { addresses: [`10.255.${i % 256}.${k % 256}`], conditions: { ready: true } },
      ],
    };
    current = { ...current, endpointSlices: slices };
    const t0 = performance.now();
    const model = buildModel(current, options, {}, cache);
    const t1 = performance.now();
    bytes = renderer.renderBytes(model).length;
    const t2 = performance.now();
    build += t1 - t0;
    render += t2 - t1;
    totals.push(t2 - t0);
  }
  const round1 = (x: number) => Math.round(x * 10) / 10;
  return {
    engine: WARM,
    services,
    endpoints: ENDPOINTS,
    parseMs,
    buildMs: round1(build / iters),
    msPerRender: round1(render / iters),
    bytes,
    peakRssMiB: mib(process.resourceUsage().maxRSS * 1024),
    totalMs: { p50: round1(percentile(totals, 50)), p99: round1(percentile(totals, 99)) },
  };
}

function goAnchor(services: number, iters: number): CaseResult | string {
  const src = join(packageRoot(), "..", "shared", "anchors", "go-render");
  if (!existsSync(src)) return `anchor not found at ${src}`;
  if (spawnSync("go", ["version"]).status !== 0) return "go not on PATH (apt-get install -y golang-go)";
  const dir = mkdtempSync(join(tmpdir(), "go-render-"));
  cpSync(src, dir, { recursive: true });
  const out = execFileSync(
    "go",
    ["run", ".", "-services", String(services), "-endpoints", String(ENDPOINTS), "-iters", String(iters), "-json"],
    {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, GOCACHE: join(dir, ".gocache"), GOFLAGS: "-mod=mod" },
    },
  );
  const r = JSON.parse(out) as { msPerRender: number; bytes: number; heapSysMiB: number };
  return {
    engine: "go text/template (anchor)",
    services,
    endpoints: ENDPOINTS,
    parseMs: 0,
    buildMs: 0,
    msPerRender: r.msPerRender,
    bytes: r.bytes,
    peakRssMiB: r.heapSysMiB,
  };
}

function main(): void {
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const iters = Number(arg("--iters") ?? 5);
  const child = arg("--child");
  if (child) {
    process.stdout.write(JSON.stringify(runCase(Number(child), arg("--engine") ?? "servicelb", iters)));
    return;
  }
  const sizes = (arg("--sizes") ?? "1000,10000").split(",").map(Number);
  // Two cores, and Go's collector runs beside its renderer: one pair of runs can mislead, so the
  // engines take turns for several rounds and the ratio reported is the median of the rounds.
  const rounds = Number(arg("--rounds") ?? 3);
  const self = fileURLToPath(import.meta.url);
  const results: Array<CaseResult & { round: number }> = [];
  const notes: string[] = [];
  const ratios = new Map<number, number[]>();
  const settingsRatios = new Map<number, number[]>();
  for (const n of sizes) {
    for (let round = 1; round <= rounds; round++) {
      const ours: CaseResult[] = [];
      for (const engine of round === 1 ? ["servicelb", SETTINGS, "liquid-per-item", WARM] : ["servicelb", SETTINGS]) {
        const out = execFileSync(
          process.execPath,
          [
            self,
            "--child",
            String(n),
            "--engine",
            engine,
            "--iters",
            engine === "liquid-per-item" ? "1" : String(engine === WARM ? 50 : iters),
          ],
          { encoding: "utf8", maxBuffer: 1 << 20 },
        );
        ours.push(JSON.parse(out) as CaseResult);
      }
      const go = goAnchor(n, iters);
      if (typeof go === "string") {
        if (round === 1) notes.push(go);
      } else {
        results.push({ ...go, round });
        ratios.set(n, [...(ratios.get(n) ?? []), ours[0]!.msPerRender / go.msPerRender]);
        settingsRatios.set(n, [...(settingsRatios.get(n) ?? []), ours[1]!.msPerRender / go.msPerRender]);
      }
      for (const r of ours) results.push({ ...r, round });
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const ratio = (r: CaseResult & { round: number }) => {
    const go = results.find((g) => g.services === r.services && g.round === r.round && g.engine.startsWith("go"));
    return go ? `${(r.msPerRender / go.msPerRender).toFixed(2)}×` : "-";
  };
  if (args.includes("--json")) {
    const medianVsGo = Object.fromEntries([...ratios].map(([n, xs]) => [n, Math.round(median(xs) * 100) / 100]));
    const settingsMedianVsGo = Object.fromEntries(
      [...settingsRatios].map(([n, xs]) => [n, Math.round(median(xs) * 100) / 100]),
    );
    process.stdout.write(
      `${JSON.stringify({ machine: machine(), rounds, medianVsGo, settingsMedianVsGo, results: results.map((r) => ({ ...r, vsGo: ratio(r) })), notes }, null, 2)}\n`,
    );
    return;
  }
  console.log(`bench/render — ${machine()}`);
  console.log(
    `full render of N HTTP services × ${ENDPOINTS} endpoints (model built beforehand, as the anchor does); ${iters} timed renders after one warm-up\n`,
  );
  console.log(
    table(
      ["round", "engine", "services", "parse ms", "build ms", "ms/render", "vs Go", "config bytes", "peak RSS MiB"],
      results.map((r) => [
        r.round,
        r.engine,
        r.services,
        r.parseMs || "-",
        r.buildMs || "-",
        r.msPerRender,
        ratio(r),
        r.bytes,
        r.peakRssMiB,
      ]),
    ),
  );
  for (const [n, xs] of ratios)
    console.log(
      `\n${n} services: servicelb / Go, median of ${xs.length} rounds: ${median(xs).toFixed(2)}× (rounds: ${xs.map((x) => x.toFixed(2)).join(", ")})`,
    );
  for (const [n, xs] of settingsRatios)
    console.log(
      `${n} services with per-Service settings: servicelb / Go (which renders none), median of ${xs.length} rounds: ${median(xs).toFixed(2)}×`,
    );
  for (const r of results) {
    if (r.totalMs)
      console.log(
        `${r.services} services, warm instance, 1 Service changed: build + render ${r.totalMs.p50} ms p50, ${r.totalMs.p99} ms p99 over 50 changes`,
      );
  }
  for (const n of notes) console.log(`note: ${n}`);
  console.log("\nGo's peak column is its heap (HeapSys), not process RSS.");
}

main();
