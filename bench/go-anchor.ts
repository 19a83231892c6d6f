/*
 * The peer anchor of bench/render: bench/anchors/go-render, the original service-loadbalancer's
 * config template under Go's text/template, built with the `go` on PATH and run on the synthetic
 * cluster that bench/synthetic.ts makes, written to a file for it.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../shared/adapters/templates.js";
import { mib } from "./machine.js";
import { syntheticCluster } from "./synthetic.js";

export const GO_ANCHOR_DIR = join(packageRoot(), "bench", "anchors", "go-render");
export const GO_ENGINE = "go text/template (anchor)";

export interface GoAnchor {
  bin: string;
  /** Where the synthetic clusters are written for it. */
  work: string;
}

export interface GoAnchorResult {
  msPerRender: number;
  /** NaN where /usr/bin/time is missing or only one render ran. */
  cpuMsPerRender: number;
  bytes: number;
  services: number;
  endpoints: number;
  /** NaN where /usr/bin/time is missing. */
  peakRssMiB: number;
}

const TIME = "/usr/bin/time";

/** The anchor built once per run, or why it cannot run (the bench prints it and runs without). */
export function buildGoAnchor(dir = GO_ANCHOR_DIR, env: NodeJS.ProcessEnv = process.env): GoAnchor | string {
  if (!existsSync(join(dir, "main.go"))) return `Go anchor not found at ${dir}: no Go rows, no ratios`;
  if (spawnSync("go", ["version"], { env }).status !== 0)
    return "go is not on PATH (apt-get install -y golang-go): no Go rows, no ratios";
  const work = mkdtempSync(join(tmpdir(), "go-render-"));
  const bin = join(work, "go-render");
  // A build cache of its own when none is set: a fresh machine's HOME may not be writable.
  execFileSync("go", ["build", "-o", bin, "."], {
    cwd: dir,
    env: { ...env, GOCACHE: env.GOCACHE ?? join(work, ".gocache") },
    stdio: ["ignore", "ignore", "inherit"],
  });
  return { bin, work };
}

/** Writes the synthetic cluster of `services` × `endpoints` once, for every run at that size. */
export function clusterFile(anchor: GoAnchor, services: number, endpoints: number, revision: number): string {
  const file = join(anchor.work, `cluster-${services}x${endpoints}.json`);
  if (!existsSync(file)) writeFileSync(file, JSON.stringify(syntheticCluster(services, endpoints, revision)));
  return file;
}

/**
 * The anchor, run twice: with `iters` timed renders and with one. Its peak RSS is the process's,
 * as the kernel counts it for ours (getrusage's ru_maxrss, read by GNU time), not the Go heap it
 * reports itself; its CPU time per render is the difference of the two runs' CPU times (reading
 * the cluster and the untimed render are in both), divided by the renders between them.
 */
export function runGoAnchor(anchor: GoAnchor, cluster: string, iters: number): GoAnchorResult {
  const run = (k: number) => {
    const argv = [anchor.bin, "-cluster", cluster, "-iters", String(k), "-json"];
    const r = existsSync(TIME)
      ? spawnSync(TIME, ["-f", "maxrss=%M cpu=%U+%S", ...argv], { encoding: "utf8" })
      : spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`the Go anchor failed: ${r.stderr}`);
    const cpu = /cpu=([\d.]+)\+([\d.]+)/.exec(r.stderr);
    return {
      ...(JSON.parse(r.stdout) as { msPerRender: number; bytes: number; services: number; endpoints: number }),
      kib: /maxrss=(\d+)/.exec(r.stderr)?.[1],
      cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : Number.NaN,
    };
  };
  const r = run(iters);
  const one = run(1);
  return {
    msPerRender: r.msPerRender,
    cpuMsPerRender: iters > 1 ? Math.round(((r.cpuMs - one.cpuMs) / (iters - 1)) * 10) / 10 : Number.NaN,
    bytes: r.bytes,
    services: r.services,
    endpoints: r.endpoints,
    peakRssMiB: r.kib === undefined ? Number.NaN : mib(Number(r.kib) * 1024),
  };
}

/** The config the anchor renders for `cluster`, to read or compare. */
export function goAnchorConfig(anchor: GoAnchor, cluster: string): string {
  const out = join(anchor.work, "out.cfg");
  execFileSync(anchor.bin, ["-cluster", cluster, "-iters", "1", "-out", out], { stdio: "ignore" });
  return readFileSync(out, "utf8");
}

/** Without GNU time the anchor's peak RSS and CPU time are not measured. */
export const gnuTimeMissing = () => !existsSync(TIME);
