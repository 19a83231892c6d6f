/*
 * bench/fleet: N agents — `startAgent` itself, many in this process, with only HAProxy faked
 * (fake-haproxy.ts: the master and the runtime API accept everything; `haproxy -c` is the real one,
 * run once per distinct config) — against s3rver behind a proxy that adds a latency to each store
 * request and answers a share of them 503 SlowDown (store-proxy.ts), and the reconcile function's
 * reconciler publishing and pinging them (fleet-publisher.ts). Per change (one endpoint moved):
 * from the config stored to each agent's apply of it (p50 / p99 / max), how many converged, how
 * many a poll rescued, store failures that escaped the SDK's retry, and what each agent asked of
 * the store (requests, bytes down) — counted at the HTTP level, so whatever the publish protocol.
 * Then `servicelb status` (the CLI, its own process) against the fleet's node records.
 *
 * Every agent here shares this machine's cores, so its times hold the CPU queue of N agents: on
 * a real fleet each node pulls, verifies and decides on its own CPU. The CPU the agents used per
 * change is printed beside them. Agents' files go to tmpfs (--dir): each real node has a disk of
 * its own, and N fsyncs on one disk would measure this machine's disk.
 * The agents are spread over --hosts processes (one per core by default), the store (s3rver and
 * the proxy) and the function run in this one.
 *   node dist/dev/bench/fleet.js [--agents 1000] [--services 1000] [--changes 5] [--latency-ms 20-50]
 *     [--slowdown 0.01] [--poll-interval 30s] [--hosts 2] [--status-runs 3] [--dir /dev/shm] [--json]
 */

import { availableParallelism, loadavg } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../shared/adapters/templates.js";
import { type ChangeOutcome, type Fleet, startFleet } from "./fleet-run.js";
import { arg, machine, percentile, table } from "./machine.js";
import { runStatusCli } from "./status-cli.js";
import { requestCount } from "./store-proxy.js";

const argText = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const agents = arg("--agents", 1000);
const services = arg("--services", 1000);
const changes = arg("--changes", 5);
const [latencyMin, latencyMax] = argText("--latency-ms", "20-50").split("-").map(Number) as [number, number];
const slowDownRate = Number(argText("--slowdown", "0.01"));
const pollInterval = argText("--poll-interval", "30s");
const statusRuns = arg("--status-runs", 3);
const dir = argText("--dir", "/dev/shm");
/** Processes the agents are spread over: one per core by default. */
const hosts = arg("--hosts", availableParallelism());
const POLL_MS = Number(/^(\d+)s$/.exec(pollInterval)?.[1] ?? Number.NaN) * 1000;
/** A change not applied by every agent within this is counted as not converged (the poll is jittered ±20 %). */
const WAIT_MS = POLL_MS * 1.2 + 10_000;
const KiB = 1024;

interface Row {
  change: string;
  publishMs: number;
  pingMs: number;
  pinged: string;
  p50: number;
  p99: number;
  max: number;
  converged: string;
  rescued: number;
  escaped: number;
  failedPasses: number;
  /** Store requests per agent for the change (status reports apart): mean and max. */
  requestsMean: number;
  requestsMax: number;
  statusWrites: number;
  kibMean: number;
  kibMax: number;
  functionRequests: number;
  functionKibUp: number;
  /** CPU this process used (agents, store, proxy, function) per agent, ms. */
  cpuPerAgentMs: number;
  load: string;
}

const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");

function row(change: string, c: ChangeOutcome, cpuMs: number): Row {
  const applied = c.agents.flatMap((a) => (a.appliedMs === undefined ? [] : [a.appliedMs]));
  const requests = c.agents.map((a) => requestCount(a.traffic) - a.traffic.statusWrites);
  const kib = c.agents.map((a) => a.traffic.bytesDown / KiB);
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  return {
    change,
    publishMs: round(c.publishMs),
    pingMs: round(c.notifyMs),
    pinged: c.pass.notify ? `${c.pass.notify.ok}/${c.pass.notify.agents}` : "-",
    p50: applied.length ? round(percentile(applied, 50)) : Number.NaN,
    p99: applied.length ? round(percentile(applied, 99)) : Number.NaN,
    max: applied.length ? round(Math.max(...applied)) : Number.NaN,
    converged: `${applied.length}/${c.agents.length}`,
    rescued: c.agents.filter((a) => a.rescuedByPoll).length,
    escaped: c.escapedErrors,
    failedPasses: c.failedPasses,
    requestsMean: round(sum(requests) / requests.length, 2),
    requestsMax: Math.max(...requests),
    statusWrites: sum(c.agents.map((a) => a.traffic.statusWrites)),
    kibMean: round(sum(kib) / kib.length, 1),
    kibMax: round(Math.max(...kib), 1),
    functionRequests: requestCount(c.functionTraffic),
    functionKibUp: round(c.functionTraffic.bytesUp / KiB, 1),
    cpuPerAgentMs: round(cpuMs / c.agents.length, 1),
    load: load(),
  };
}

interface StatusRun {
  ms: number;
  /** The command's CPU time (user + system): what a busy machine inflates less than wall time. */
  cpuMs: number;
  exitCode: number | null;
  summary: unknown;
}

/** `servicelb status --format json`, the CLI in its own process, through its own endpoint of the proxy. */
async function runStatus(fleet: Fleet): Promise<StatusRun> {
  return runStatusCli(
    join(packageRoot(), "bin", "servicelb.js"),
    fleet.storeUrl,
    await fleet.proxy.endpointFor("status"),
  );
}

async function main(): Promise<void> {
  const loadBefore = load();
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  const fleet = await startFleet({
    agents,
    services,
    latencyMs: { min: latencyMin, max: latencyMax },
    slowDownRate,
    pollInterval,
    statusInterval: "60s",
    dir,
    hosts,
  });
  const startMs = round(performance.now() - started);
  const cpuMs = (since: NodeJS.CpuUsage) => {
    const d = process.cpuUsage(since);
    return (d.user + d.system) / 1000;
  };
  const rows: Row[] = [row("start", fleet.initial, cpuMs(cpu0))];
  const applied: number[] = [];
  try {
    for (let i = 1; i <= changes; i++) {
      const cpu = process.cpuUsage();
      const c = await fleet.change(WAIT_MS);
      rows.push(row(String(i), c, cpuMs(cpu)));
      for (const a of c.agents) if (a.appliedMs !== undefined) applied.push(a.appliedMs);
      if (!process.argv.includes("--json")) console.error(`change ${i}: ${JSON.stringify(rows.at(-1))}`);
    }
    const statuses: StatusRun[] = [];
    for (let i = 0; i < statusRuns; i++) statuses.push(await runStatus(fleet));
    const rssMiB = round(process.memoryUsage().rss / 2 ** 20);
    const { counts, hosts: hostMemory = [] } = await fleet.state();
    const config = fleet.initial.pass.counts;
    const report = {
      machine: machine(),
      agents,
      hosts,
      services,
      configBytes: config?.bytes,
      pollInterval,
      latencyMs: [latencyMin, latencyMax],
      slowDownRate,
      loadBefore,
      startMs,
      rows,
      allChanges: applied.length
        ? { p50: round(percentile(applied, 50)), p99: round(percentile(applied, 99)), max: round(Math.max(...applied)) }
        : null,
      status: statuses,
      fakeHaproxy: counts,
      rssMiB,
      hostMemory,
    };
    if (process.argv.includes("--json")) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      return;
    }
    console.log(`bench/fleet — ${machine()}`);
    console.log(
      `${agents} agents (in ${hosts} processes, HAProxy faked) × ${services} Services (config ${round((config?.bytes ?? 0) / KiB)} KiB), store: s3rver behind ${latencyMin}–${latencyMax} ms per request and ${slowDownRate * 100} % 503 SlowDown; --poll-interval ${pollInterval}; load before ${loadBefore}; ${agents} agents started (each pulled the config) in ${startMs} ms\n`,
    );
    console.log(
      table(
        [
          "change",
          "publish ms",
          "pings ms",
          "pinged",
          "applied p50 ms",
          "p99",
          "max",
          "converged",
          "by poll",
          "errors escaped",
          "failed passes",
          "req/agent mean",
          "max",
          "status PUTs",
          "KiB/agent mean",
          "max",
          "function req",
          "function KiB up",
          "CPU ms/agent",
          "load",
        ],
        rows.map((r) => [
          r.change,
          r.publishMs,
          r.pingMs,
          r.pinged,
          r.p50,
          r.p99,
          r.max,
          r.converged,
          r.rescued,
          r.escaped,
          r.failedPasses,
          r.requestsMean,
          r.requestsMax,
          r.statusWrites,
          r.kibMean,
          r.kibMax,
          r.functionRequests,
          r.functionKibUp,
          r.cpuPerAgentMs,
          r.load,
        ]),
      ),
    );
    if (report.allChanges)
      console.log(
        `\nAll ${changes} changes, every agent: applied p50 ${report.allChanges.p50} ms, p99 ${report.allChanges.p99} ms, max ${report.allChanges.max} ms (from the config stored).`,
      );
    console.log(
      `Fake HAProxy: ${counts.starts} starts, ${counts.reloads} reloads, ${counts.checksAsked} checks asked (${counts.checksRun} run for real), ${counts.runtimeCommands} runtime commands, ${counts.patternSwaps} pattern swaps. RSS ${rssMiB} MiB.`,
    );
    for (const h of hostMemory)
      console.log(
        `Host of ${h.agents} agents: RSS ${h.rssMiB} MiB (peak ${h.peakRssMiB}), heap used ${h.heapUsedMiB} MiB: ${round(h.peakRssMiB / h.agents)} MiB per agent at the peak.`,
      );
    console.log(
      `\n\`servicelb status --format json\` against the ${agents} node records (its own process, through the proxy):\n`,
    );
    console.log(
      table(
        ["run", "ms", "CPU ms", "exit", "summary"],
        statuses.map((s, i) => [i + 1, s.ms, s.cpuMs, String(s.exitCode), JSON.stringify(s.summary)]),
      ),
    );
  } finally {
    await fleet.stop();
  }
}

await main();
