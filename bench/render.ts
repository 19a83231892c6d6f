import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildModel } from "../shared/core/build-model.js";
import { parseRenderOptions } from "../shared/core/options.js";
import { Renderer, type TemplateSet } from "../shared/core/render.js";
import { parseSnapshot } from "../shared/core/snapshot.js";
import { loadTemplates, packageRoot } from "../shared/adapters/templates.js";
import { machine, mib, table } from "./machine.js";
import { syntheticCluster } from "./synthetic.js";

/**
 * bench/render: full renders of synthetic clusters (N HTTP services × 10 endpoints) against the
 * Go text/template anchor, in one run. Each case runs in its own process so peak RSS is its own.
 *   node dist/bench/render.js [--json] [--sizes 1000,10000] [--iters 5]
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
}

const ENDPOINTS = 10;

/** The same templates with every fragment made non-plain, so liquidjs renders each item itself. */
function naive(t: TemplateSet): TemplateSet {
  const slow = (s: string) => `${s}{{ "" }}`;
  return { ...t, backend: slow(t.backend), server: slow(t.server), httpRule: slow(t.httpRule), tcpFrontend: slow(t.tcpFrontend) };
}

function runCase(services: number, engine: string, iters: number): CaseResult {
  const text = JSON.stringify(syntheticCluster(services, ENDPOINTS));
  const t0 = performance.now();
  const snapshot = parseSnapshot(text);
  const t1 = performance.now();
  // Loopback-free options as the anchor renders: one HTTP frontend, default algorithm.
  const options = parseRenderOptions({ minServerSlots: 1 });
  const model = buildModel(snapshot, options);
  const t2 = performance.now();
  const templates = loadTemplates();
  const renderer = new Renderer(engine === "liquid-per-item" ? naive(templates) : templates);
  const bytes = Buffer.byteLength(renderer.render(model));
  const start = performance.now();
  for (let i = 0; i < iters; i++) renderer.render(model);
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

function goAnchor(services: number, iters: number): CaseResult | string {
  const src = join(packageRoot(), "..", "shared", "anchors", "go-render");
  if (!existsSync(src)) return `anchor not found at ${src}`;
  if (spawnSync("go", ["version"]).status !== 0) return "go not on PATH (apt-get install -y golang-go)";
  const dir = mkdtempSync(join(tmpdir(), "go-render-"));
  cpSync(src, dir, { recursive: true });
  const out = execFileSync("go", ["run", ".", "-services", String(services), "-endpoints", String(ENDPOINTS), "-iters", String(iters), "-json"], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, GOCACHE: join(dir, ".gocache"), GOFLAGS: "-mod=mod" },
  });
  const r = JSON.parse(out) as { msPerRender: number; bytes: number; heapSysMiB: number };
  return { engine: "go text/template (anchor)", services, endpoints: ENDPOINTS, parseMs: 0, buildMs: 0, msPerRender: r.msPerRender, bytes: r.bytes, peakRssMiB: r.heapSysMiB };
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
  for (const n of sizes) {
    for (let round = 1; round <= rounds; round++) {
      const ours: CaseResult[] = [];
      for (const engine of round === 1 ? ["servicelb", "liquid-per-item"] : ["servicelb"]) {
        const out = execFileSync(process.execPath, [self, "--child", String(n), "--engine", engine, "--iters", engine === "servicelb" ? String(iters) : "1"], { encoding: "utf8", maxBuffer: 1 << 20 });
        ours.push(JSON.parse(out) as CaseResult);
      }
      const go = goAnchor(n, iters);
      if (typeof go === "string") {
        if (round === 1) notes.push(go);
      } else {
        results.push({ ...go, round });
        ratios.set(n, [...(ratios.get(n) ?? []), ours[0]!.msPerRender / go.msPerRender]);
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
    process.stdout.write(`${JSON.stringify({ machine: machine(), rounds, medianVsGo, results: results.map((r) => ({ ...r, vsGo: ratio(r) })), notes }, null, 2)}\n`);
    return;
  }
  console.log(`bench/render — ${machine()}`);
  console.log(`full render of N HTTP services × ${ENDPOINTS} endpoints (model built beforehand, as the anchor does); ${iters} timed renders after one warm-up\n`);
  console.log(
    table(
      ["round", "engine", "services", "parse ms", "build ms", "ms/render", "vs Go", "config bytes", "peak RSS MiB"],
      results.map((r) => [r.round, r.engine, r.services, r.parseMs || "-", r.buildMs || "-", r.msPerRender, ratio(r), r.bytes, r.peakRssMiB]),
    ),
  );
  for (const [n, xs] of ratios) console.log(`\n${n} services: servicelb / Go, median of ${xs.length} rounds: ${median(xs).toFixed(2)}× (rounds: ${xs.map((x) => x.toFixed(2)).join(", ")})`);
  for (const n of notes) console.log(`note: ${n}`);
  console.log("\nGo's peak column is its heap (HeapSys), not process RSS.");
}

main();
