/*
 * bench/status: `servicelb status` (the CLI, its own process) against N node records in s3rver
 * behind the store proxy's latency and 503s (store-proxy.ts) — issue 30 §4's fleet without the
 * fleet, so that the command's own time is measured apart from N agents' load. The records are
 * the agents' report documents (agent/status-report.ts), each node serving the newest config; the
 * command's CPU (user + system, GNU time) is printed beside its wall time.
 * `--compare BIN` runs another checkout's bin/servicelb.js in turns with this one's, against the
 * same records at the same load: a before-and-after of one sitting.
 *   node dist/dev/bench/status.js [--nodes 1000] [--runs 3] [--latency-ms 20-50] [--slowdown 0.01]
 *     [--compare ../other/bin/servicelb.js] [--cpu-prof DIR] [--json]
 */

import { loadavg } from "node:os";
import { join } from "node:path";
import { createObjectStore } from "../shared/adapters/store.js";
import { packageRoot } from "../shared/adapters/templates.js";
import { S3RVER_CREDENTIALS, startS3 } from "../test/support/s3.js";
import { arg, machine, percentile, seeded, table } from "./machine.js";
import { runStatusCli } from "./status-cli.js";
import { startStoreProxy } from "./store-proxy.js";

const argText = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const nodes = arg("--nodes", 1000);
const runs = arg("--runs", 3);
const [latencyMin, latencyMax] = argText("--latency-ms", "20-50").split("-").map(Number) as [number, number];
const slowDownRate = Number(argText("--slowdown", "0.01"));
const cpuProf = argText("--cpu-prof", "");
const compare = argText("--compare", "");
/** Records written to s3rver at once while setting up. */
const SETUP_CONCURRENCY = 32;

interface Run {
  cli: string;
  ms: number;
  cpuMs: number;
  /** This process's CPU meanwhile: s3rver and the proxy, the store the command waits for. */
  storeCpuMs: number;
  exitCode: number | null;
  summary: unknown;
}

const round = (n: number) => Math.round(n);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");

function report(node: string, key: string, sha256: string): Record<string, unknown> {
  const at = new Date().toISOString();
  return {
    node,
    applied: { key, revision: "2", sha256, how: "runtime", appliedAt: at },
    lastError: null,
    backoff: null,
    pinned: null,
    skipped: [],
    haproxy: { running: true, restarts: 0, lastRestart: null, pendingRestart: null },
    pull: { lastSuccessAt: at, consecutiveFailures: 0, lastFailure: null, stale: false, staleAfterSeconds: 90 },
    reportIntervalSeconds: 3600,
    reportedAt: at,
    agent: "servicelb/0.1.0",
    digests: ["sha256", "tree1"],
    formats: ["chunks1"],
    openFiles: { limit: 1_048_576, reserved: 228 },
  };
}

async function runStatus(cli: string, storeUrl: string, endpoint: string, i: number): Promise<Run> {
  const cpu = process.cpuUsage();
  const run = await runStatusCli(cli, storeUrl, endpoint, cpuProf ? ["--cpu-prof", "--cpu-prof-dir", cpuProf] : []);
  const store = process.cpuUsage(cpu);
  if (!process.argv.includes("--json")) console.error(`run ${i + 1} (${cli}): ${run.ms} ms`);
  return { cli, ...run, storeCpuMs: round((store.user + store.system) / 1000) };
}

async function main(): Promise<void> {
  const s3 = await startS3("fleet");
  const proxy = await startStoreProxy({
    target: s3.endpoint,
    latencyMs: { min: latencyMin, max: latencyMax },
    slowDownRate,
    random: seeded(30),
  });
  const storeUrl = "s3://fleet/status-bench";
  const store = createObjectStore({
    url: storeUrl,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
  });
  try {
    await store.publish({ config: "global\n", revision: "1", generator: "servicelb/bench" });
    const newest = await store.publish({ config: "global\n# 2\n", revision: "2", generator: "servicelb/bench" });
    const names = Array.from({ length: nodes }, (_, i) => `node-${String(i).padStart(5, "0")}`);
    for (let i = 0; i < names.length; i += SETUP_CONCURRENCY)
      await Promise.all(
        names.slice(i, i + SETUP_CONCURRENCY).map((n) => store.putStatus(n, report(n, newest.key, newest.sha256))),
      );
    const endpoint = await proxy.endpointFor("status");
    const loadBefore = load();
    const results: Run[] = [];
    const ours = join(packageRoot(), "bin", "servicelb.js");
    for (let i = 0; i < runs; i++) {
      results.push(await runStatus(ours, storeUrl, endpoint, i));
      if (compare) results.push(await runStatus(compare, storeUrl, endpoint, i));
    }
    const loadAfter = load();
    const traffic = proxy.traffic().get("status");
    const out = {
      machine: machine(),
      nodes,
      latencyMs: [latencyMin, latencyMax],
      slowDownRate,
      loadBefore,
      loadAfter,
      runs: results,
      requestsPerRun: traffic && {
        list: traffic.requests.list / results.length,
        get: traffic.requests.get / results.length,
        head: traffic.requests.head / results.length,
        slowDowns: traffic.slowDowns / results.length,
      },
      medianMs: Object.fromEntries(
        [...new Set(results.map((r) => r.cli))].map((cli) => [
          cli,
          percentile(
            results.filter((r) => r.cli === cli).map((r) => r.ms),
            50,
          ),
        ]),
      ),
    };
    if (process.argv.includes("--json")) {
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
      return;
    }
    console.log(`bench/status — ${machine()}`);
    console.log(
      `${nodes} node records; store: s3rver behind ${latencyMin}–${latencyMax} ms per request and ${slowDownRate * 100} % 503 SlowDown; load before ${loadBefore}, after ${loadAfter}; requests per run ${JSON.stringify(out.requestsPerRun)}\n`,
    );
    console.log(
      table(
        ["run", "CLI", "wall ms", "CPU ms", "store CPU ms", "exit", "summary"],
        results.map((r, i) => [
          i + 1,
          r.cli === ours ? "this checkout" : r.cli,
          r.ms,
          r.cpuMs,
          r.storeCpuMs,
          String(r.exitCode),
          JSON.stringify(r.summary).slice(0, 60),
        ]),
      ),
    );
  } finally {
    store.close();
    await proxy.stop();
    await s3.stop();
  }
}

await main();
