import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { haproxyAvailable } from "../shared/adapters/haproxy/check.js";
import { showProc } from "../shared/adapters/haproxy/master.js";
import { processAlive } from "../shared/adapters/haproxy/proc-info.js";
import { createObjectStore } from "../shared/adapters/store.js";
import { RenderContext } from "../shared/app/render-context.js";
import { snapshotFromDocuments } from "../shared/core/kubernetes/snapshot.js";
import { echoPods, httpGet, web } from "../test/support/agent.js";
import { list } from "../test/support/fixtures.js";
import { loopbackOptions } from "../test/support/haproxy.js";
import { freePort } from "../test/support/net.js";
import { S3RVER_CREDENTIALS, startS3 } from "../test/support/s3.js";
import { fillerCluster, spawnAgent } from "./agent-process.js";
import { arg, machine, percentile, table } from "./machine.js";

/**
 * bench/crash: how long a node is without its HAProxy after HAProxy dies, with the agent as it
 * runs on a node (its own process, dist/functions/agent.js), a real HAProxy and s3rver.
 *   - first crash: kill -9 of a master that has served for a while;
 *   - repeated crashes: the same, again and again, each after the new master served 4 s;
 *   - a worker killed (2.6's master then exits: "exit-on-failure");
 *   - a crash loop: each new master killed as soon as it serves, as a config that crashes
 *     HAProxy would; the agent backs off, capped.
 * For reference, HAProxy started alone on the same config, three times: no restart can be faster.
 * "Down" is from the kill until a new master answers `show proc` with a worker; beside it, the
 * longest run of failed requests of a client that sends one request per new connection every
 * 5 ms (the orphaned old worker may serve on for a moment after its master is killed).
 *   node dist/dev/bench/crash.js [--services 1000] [--repeats 6] [--loop 7] [--json]
 */

const ENDPOINTS = 10;
const A = "127.0.0.2";
const TOKEN = "bench-token";
/** Longer than the agent's 3 s after which a master counts as stable. */
const STABLE_WAIT_MS = 4000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const round = (ms: number) => Math.round(ms);

const cluster = (services: number, closedPort: number, extra: unknown[]) =>
  fillerCluster(services, ENDPOINTS, closedPort, extra);

/** A client that opens a new connection per request, every 5 ms, and remembers when requests failed. */
function prober(port: number) {
  let running = true;
  const results: Array<{ at: number; ok: boolean }> = [];
  const done = (async () => {
    while (running) {
      const at = performance.now();
      const ok = await httpGet(port, "/web/").then(
        (r) => r.status === 200,
        () => false,
      );
      results.push({ at, ok });
      await sleep(5);
    }
  })();
  return {
    /** Longest run of failed requests after `from`: from the first failure to the next success. */
    longestGapMs(from: number): number {
      let longest = 0;
      let failingSince: number | undefined;
      for (const r of results.filter((x) => x.at >= from)) {
        if (!r.ok) failingSince ??= r.at;
        else if (failingSince !== undefined) {
          longest = Math.max(longest, r.at - failingSince);
          failingSince = undefined;
        }
      }
      return longest;
    },
    failedSince: (from: number) => results.filter((r) => r.at >= from && !r.ok).length,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

async function main(): Promise<void> {
  const services = arg("--services", 1000);
  const repeats = arg("--repeats", 6);
  const loop = arg("--loop", 7);
  const haproxyVersion = await haproxyAvailable();
  if (!haproxyVersion) throw new Error("haproxy is not installed: apt-get install -y haproxy");

  const s3 = await startS3();
  const pods = await echoPods({ [A]: "A" });
  const lb = await loopbackOptions({ checkInterval: "2s", hardStopAfter: "5m" });
  const dir = mkdtempSync(join(tmpdir(), "bench-crash-"));
  const closedPort = await freePort();
  const agentPort = await freePort();
  const masterSocket = join(dir, "master.sock");
  const url = `s3://${s3.bucket}/bench`;
  const store = createObjectStore({
    url,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
  });
  const config = new RenderContext(lb.options).render(
    snapshotFromDocuments([list(cluster(services, closedPort, web("web", pods.port, [A])), "1000")]),
  ).config;
  await store.publish({ config, revision: "1000", generator: "bench" });

  /** HAProxy alone: from spawn until its master answers with a worker. */
  const coldStarts: number[] = [];
  const referenceCfg = join(dir, "reference.cfg");
  writeFileSync(referenceCfg, config);
  for (let i = 0; i < 3; i++) {
    const socket = join(dir, "reference.sock");
    const t0 = performance.now();
    const alone = spawn("haproxy", ["-W", "-S", socket, "-f", referenceCfg], { stdio: "ignore" });
    while (
      !(await showProc(socket, { timeoutMs: 200 }).then(
        (p) => p.master.pid === alone.pid && p.workers.length > 0,
        () => false,
      ))
    )
      await sleep(2);
    coldStarts.push(performance.now() - t0);
    const exited = new Promise((r) => alone.once("exit", r));
    alone.kill("SIGTERM");
    await exited;
  }

  let agent: ChildProcess | undefined;
  const probe = prober(lb.options.httpPort);
  try {
    agent = spawnAgent({
      store: url,
      storeEndpoint: s3.endpoint,
      port: agentPort,
      configPath: join(dir, "haproxy.cfg"),
      masterSocket,
      token: TOKEN,
      logFile: join(tmpdir(), "bench-crash.log"),
      env: { SERVICELB_STOP_GRACE: "2s" },
    });

    /** The serving master's pid and its worker's, once a master other than `not` serves. */
    const serving = async (not?: number): Promise<{ master: number; worker: number }> => {
      for (;;) {
        const s = await showProc(masterSocket, { timeoutMs: 200 }).catch(() => undefined);
        if (s && s.master.pid !== not && s.workers.length > 0)
          return { master: s.master.pid, worker: s.workers[0]!.pid };
        await sleep(2);
      }
    };
    /** Kills `pid`; resolves with the time until a new master serves, and the client's longest gap. */
    const crash = async (pid: number, master: number) => {
      const t0 = performance.now();
      process.kill(pid, "SIGKILL");
      const next = await serving(master);
      const downMs = performance.now() - t0;
      // The client's view settles once the new worker answers it.
      while (
        !(await httpGet(lb.options.httpPort, "/web/").then(
          (r) => r.status === 200,
          () => false,
        ))
      )
        await sleep(2);
      return { next, downMs, gapMs: probe.longestGapMs(t0), failed: probe.failedSince(t0) };
    };

    const loadBefore = loadavg()[0]!;
    let current = await serving();
    await sleep(STABLE_WAIT_MS);
    const rows: Array<{ scenario: string; downMs: number[]; gapMs: number[]; failed: number | string }> = [
      { scenario: "for reference: HAProxy started alone (3 times)", downMs: coldStarts, gapMs: [], failed: "-" },
    ];

    const first = await crash(current.master, current.master);
    rows.push({
      scenario: "first crash (kill -9 of the master)",
      downMs: [first.downMs],
      gapMs: [first.gapMs],
      failed: first.failed,
    });
    current = first.next;

    const repeated = {
      scenario: `repeated crashes (${repeats} kills, each after 4 s up)`,
      downMs: [] as number[],
      gapMs: [] as number[],
      failed: 0,
    };
    for (let i = 0; i < repeats; i++) {
      await sleep(STABLE_WAIT_MS);
      const r = await crash(current.master, current.master);
      repeated.downMs.push(r.downMs);
      repeated.gapMs.push(r.gapMs);
      repeated.failed += r.failed;
      current = r.next;
    }
    rows.push(repeated);

    await sleep(STABLE_WAIT_MS);
    const worker = await crash(current.worker, current.master);
    rows.push({
      scenario: "worker killed (its master exits too)",
      downMs: [worker.downMs],
      gapMs: [worker.gapMs],
      failed: worker.failed,
    });
    current = worker.next;

    await sleep(STABLE_WAIT_MS);
    const crashLoop = {
      scenario: `crash loop (${loop} kills, each as soon as it serves)`,
      downMs: [] as number[],
      gapMs: [] as number[],
      failed: 0,
    };
    for (let i = 0; i < loop; i++) {
      const r = await crash(current.master, current.master);
      crashLoop.downMs.push(r.downMs);
      crashLoop.gapMs.push(r.gapMs);
      crashLoop.failed += r.failed;
      current = r.next;
    }
    rows.push(crashLoop);

    const result = {
      machine: machine(),
      haproxy: haproxyVersion,
      services,
      configBytes: Buffer.byteLength(config),
      // The machine may be shared: HAProxy's start time, which bounds recovery, grows with its load.
      loadAverage: [loadBefore, loadavg()[0]!].map((l) => Math.round(l * 10) / 10),
      scenarios: rows.map((r) => ({ ...r, downMs: r.downMs.map(round), gapMs: r.gapMs.map(round) })),
    };
    if (process.argv.includes("--json")) {
      console.log(JSON.stringify(result, null, 2));
      return;
    }
    console.log(`bench/crash — ${result.machine}, HAProxy ${haproxyVersion}`);
    console.log(
      `${services} Services × ${ENDPOINTS} endpoints (${result.configBytes} config bytes); 1-minute load average ${result.loadAverage.join(" → ")}\n`,
    );
    const fmt = (v: number[]) =>
      v.length === 1 ? `${round(v[0]!)}` : `p50 ${round(percentile(v, 50))}, max ${round(Math.max(...v))}`;
    console.log(
      table(
        [
          "scenario",
          "down (kill → new master serves), ms",
          "each, ms",
          "client's longest failing run, ms",
          "failed requests",
        ],
        rows.map((r) => [
          r.scenario,
          fmt(r.downMs),
          r.downMs.map(round).join(", "),
          r.gapMs.length > 0 ? fmt(r.gapMs) : "-",
          r.failed,
        ]),
      ),
    );
    console.log(`\nThe agent's and HAProxy's logs of this run: ${join(tmpdir(), "bench-crash.log")}`);
  } finally {
    await probe.stop();
    if (agent && agent.exitCode === null) {
      const exited = new Promise((r) => agent!.once("exit", r));
      agent.kill("SIGTERM");
      await exited;
    }
    const left = await showProc(masterSocket, { timeoutMs: 200 }).catch(() => undefined);
    if (left && processAlive(left.master.pid)) process.kill(left.master.pid, "SIGKILL");
    store.close();
    await pods.close();
    await s3.stop();
    lb.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
