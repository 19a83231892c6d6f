/*
 * bench/scale: N Services end to end through the local stack (`npm start`'s processes: the
 * Kubernetes API emulator with the cluster file, the event bridge, the reconcile function,
 * s3rver, the agent and HAProxy, the demo backends), from the cluster file loaded to the last
 * Service routed through HAProxy: the time of each stage of the first pass and the peak RSS of
 * the process doing it. Each size runs in a fresh stack; the sizes are printed side by side with
 * each stage's ratio to the smallest size's, beside the ratio of the sizes: a linear stage grows
 * as the size, a quadratic one as its square.
 *
 * Stages are timed by the stage trace (SERVICELB_TRACE_FILE), RSS by sampling /proc every 50 ms
 * (a stage shorter than that may miss its peak; every process's VmHWM is printed too). Health
 * checks run every --check-interval (default 1h): at 50,000 Services × 10 endpoints the default
 * 2 s would be 250,000 checks a second against the demo backends, which measures those, not this.
 *   node dist/dev/bench/scale.js [--sizes 10000,50000] [--endpoints 10] [--check-interval 1h] [--json]
 */

import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { freePort } from "../shared/dev/ports.js";
import { list, service, slice } from "../test/support/fixtures.js";
import { httpGet } from "../test/support/net.js";
import { machine, mib, table } from "./machine.js";
import { readTrace, type TraceRecord } from "./trace-file.js";

const argValue = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const sizes = argValue("--sizes", "10000,50000").split(",").map(Number);
const endpointsPerService = Number(argValue("--endpoints", "10"));
const checkInterval = argValue("--check-interval", "1h");
const SAMPLE_MS = 50;
const DEMO_PORT_HOSTS = 10;

/** Which part of the stack a process is, from its command line. */
type Part = "stack" | "reconcile" | "render" | "s3rver" | "agent" | "haproxy -c" | "haproxy" | "demo backends";

function partOf(cmdline: string): Part | undefined {
  if (cmdline.includes("reconcile.mjs")) return "reconcile";
  if (cmdline.includes("render.mjs")) return "render";
  if (cmdline.includes("s3rver")) return "s3rver";
  if (cmdline.includes("servicelb.js\0agent")) return "agent";
  if (cmdline.includes("demo-backends")) return "demo backends";
  if (/(^|\/)haproxy\0/.test(cmdline)) return cmdline.includes("\0-c\0") ? "haproxy -c" : "haproxy";
  return undefined;
}

const readOr = (path: string) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
};

const statusKiB = (status: string, field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);

interface Sample {
  at: number;
  /** RSS in KiB per part (the sum of its processes: HAProxy's master and workers are one part). */
  rss: Partial<Record<Part, number>>;
}

/**
 * Samples the RSS of every process under `root` (the stack's process) every SAMPLE_MS, and keeps
 * each process's VmHWM as last seen.
 */
function sampleTree(root: number) {
  const samples: Sample[] = [];
  const peaks = new Map<number, { part: Part; hwmKiB: number }>();
  const tick = () => {
    const parentOf = new Map<number, number>();
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = readOr(`/proc/${entry}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid) parentOf.set(Number(entry), ppid);
    }
    const inTree = (pid: number): boolean => {
      for (let p: number | undefined = pid; p !== undefined && p > 1; p = parentOf.get(p)) if (p === root) return true;
      return false;
    };
    const rss: Sample["rss"] = {};
    for (const pid of parentOf.keys()) {
      if (!inTree(pid)) continue;
      const part = pid === root ? "stack" : partOf(readOr(`/proc/${pid}/cmdline`));
      if (!part) continue;
      const status = readOr(`/proc/${pid}/status`);
      const kib = statusKiB(status, "VmRSS");
      if (Number.isNaN(kib)) continue;
      rss[part] = (rss[part] ?? 0) + kib;
      peaks.set(pid, { part, hwmKiB: Math.max(peaks.get(pid)?.hwmKiB ?? 0, statusKiB(status, "VmHWM") || 0) });
    }
    samples.push({ at: performance.timeOrigin + performance.now(), rss });
  };
  const timer = setInterval(tick, SAMPLE_MS);
  return {
    samples,
    peaks,
    stop: () => clearInterval(timer),
    /** The largest RSS of `part` sampled in [from, to], in MiB. */
    peakMiB(part: Part, from: number, to: number): number {
      let max = 0;
      for (const s of samples) if (s.at >= from && s.at <= to) max = Math.max(max, s.rss[part] ?? 0);
      return max === 0 ? NaN : mib(max * 1024);
    },
  };
}

const hostsOf = (endpoints: number) =>
  Array.from({ length: endpoints }, (_, k) => `127.0.0.${(k % DEMO_PORT_HOSTS) + 1}`);
/** Where the warm change moves an endpoint: the Service "spare" has it from the start, so its demo backend runs. */
const SPARE_HOST = `127.0.0.${DEMO_PORT_HOSTS + 1}`;
const sliceOf = (name: string, hosts: string[], port: number) =>
  slice(name, [{ name: "http", port }], hosts, { name: `${name}-0` });

/** N Services, each with one slice of `endpoints` endpoints on the demo backends' loopback addresses. */
function clusterFile(services: number, endpoints: number, port: number): string {
  const items: unknown[] = [];
  for (let i = 0; i < services; i++)
    items.push(
      service(`svc-${i}`, [{ name: "http", port: 80, targetPort: port }]),
      sliceOf(`svc-${i}`, hostsOf(endpoints), port),
    );
  items.push(service("spare", [{ name: "http", port: 80, targetPort: port }]), sliceOf("spare", [SPARE_HOST], port));
  return JSON.stringify(list(items));
}

interface StageRow {
  stage: string;
  part: Part;
  ms: number;
  peakRssMiB: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function runSize(services: number): Promise<{
  stages: StageRow[];
  warm: StageRow[];
  hwmMiB: Record<string, number>;
  counts: { watchEvents: number; passes: number; failedBeforePublish: number };
  failure: string | undefined;
}> {
  const root = mkdtempSync(join(tmpdir(), "bench-scale-"));
  const traceFile = join(root, "trace.ndjson");
  const [httpPort, statsPort, port] = [await freePort(), await freePort(), await freePort()];
  const file = join(root, "cluster.json");
  writeFileSync(file, clusterFile(services, endpointsPerService, port));
  mkdirSync(join(root, "data"));
  const t0 = performance.timeOrigin + performance.now();
  const stack = spawn(
    process.execPath,
    [
      fileURLToPath(new URL("e2e-stack.js", import.meta.url)),
      "servicelb",
      "--demo",
      "--cluster-file",
      file,
      "--data-dir",
      join(root, "data"),
      "--http-port",
      String(httpPort),
      "--stats-port",
      String(statsPort),
      "--resync",
      "600000",
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, SERVICELB_TRACE_FILE: traceFile, SERVICELB_CHECK_INTERVAL: checkInterval },
    },
  );
  let out = "";
  stack.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  stack.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const sampler = sampleTree(stack.pid!);
  let served = NaN;
  /** When the wait ended: the last Service routed, or the agent's error seen. */
  let ended = NaN;
  let moved = { edit: NaN, served: NaN };
  /** The agent's error when HAProxy could not run the config (then nothing after `haproxy -c` is timed). */
  let failure: string | undefined;
  try {
    const deadline = Date.now() + 30 * 60_000;
    const last = `/svc-${services - 1}/`;
    let asked = 0;
    for (;;) {
      if (stack.exitCode !== null) throw new Error(`the stack exited (${stack.exitCode}):\n${out.slice(-4000)}`);
      if (Date.now() > deadline) throw new Error(`svc-${services - 1} not routed after 30 min:\n${out.slice(-4000)}`);
      const r = await httpGet(httpPort, last).catch(() => ({ status: 0 }));
      if (r.status === 200) break;
      if (Date.now() - asked > 1000) {
        asked = Date.now();
        failure = await applyFailure(out);
        if (failure) break;
      }
      await sleep(20);
    }
    ended = performance.timeOrigin + performance.now();
    if (!failure) {
      served = ended;
      // The warm change: once the passes the start's events asked for are over, one endpoint moved through the API.
      await waitQuiet(traceFile);
      moved = await moveEndpoint(root, services, port, httpPort);
    }
    // One more sample after the last stage.
    await sleep(2 * SAMPLE_MS);
  } finally {
    sampler.stop();
    if (stack.exitCode === null) {
      stack.kill("SIGINT");
      await new Promise((r) => stack.once("exit", r));
    }
    writeFileSync(logFile(services), out);
  }
  const records = readTrace(traceFile);
  rmSync(root, { recursive: true, force: true });

  const first = (ev: string, pred: (r: TraceRecord) => boolean = () => true) => {
    const r = records.find((x) => x.ev === ev && pred(x));
    if (!r) throw new Error(`no "${ev}" in the trace of ${services} Services: see ${logFile(services)}`);
    return r;
  };
  const loadStart = first("load.start");
  const loadEnd = first("load.end");
  const published = first("pass.published", (r) => r.status === "published");
  const n = published.n;
  const passStart = first("pass.start", (r) => r.n === n);
  const listed = first("pass.listed", (r) => r.n === n);
  // The first render is the cold one; the published pass may come later and reuse its model (a pass abandoned at its deadline after rendering).
  const rendered = first("pass.rendered");
  const notified = first("pass.notified", (r) => r.n === n);
  const key = published.key;
  const pullEnd = first("pull.end", (r) => r.key === key);
  const pullStart = [...records].reverse().find((r) => r.ev === "pull.start" && r.at <= pullEnd.at)!;
  const checked = failure?.startsWith("check") ? { at: NaN } : first("check.done", (r) => r.key === key);
  const started = failure ? { at: NaN } : first("start.end", (r) => r.key === key);
  const publishedRendered = first("pass.rendered", (r) => r.n === n);
  const buildMs = Number(rendered.buildMs);
  const renderMs = Number(rendered.renderMs);
  const row = (stage: string, part: Part, from: number, to: number, ms = to - from): StageRow => ({
    stage,
    part,
    ms: Math.round(ms),
    peakRssMiB: sampler.peakMiB(part, from, to),
  });
  const stages = [
    row("cluster file read and loaded into the emulator", "stack", loadStart.at, loadEnd.at),
    row("list of the pass that published (paged, from the emulator)", "reconcile", passStart.at, listed.at),
    row("  the emulator serving the list", "stack", passStart.at, listed.at),
    row(
      "build the model (first pass that got there: cold)",
      "reconcile",
      rendered.at - buildMs - renderMs,
      rendered.at,
      buildMs,
    ),
    row(
      "render the config (first pass that got there: cold)",
      "reconcile",
      rendered.at - buildMs - renderMs,
      rendered.at,
      renderMs,
    ),
    row("publish to s3rver", "reconcile", publishedRendered.at, published.at),
    row("  s3rver storing it", "s3rver", publishedRendered.at, published.at),
    row("notify the agent", "reconcile", published.at, notified.at),
    row("agent pull (get, verify sha256)", "agent", pullStart.at, pullEnd.at),
    row("haproxy -c", "haproxy -c", pullEnd.at, checked.at),
    row("write and start HAProxy", "haproxy", checked.at, started.at),
    row("start returned → last Service routed (< 0: routed first)", "haproxy", started.at, served),
    row("total: pass start → last Service routed", "reconcile", passStart.at, served),
    row("whole run: stack start → last Service routed", "stack", t0, served),
  ];
  const counts = {
    watchEvents: records.filter((r) => r.proc === "bridge" && r.ev === "event" && r.at <= ended).length,
    passes: records.filter((r) => r.ev === "pass.start" && r.at <= ended).length,
    // A pass that failed (its list timed out, its deadline passed) has no pass.published; the function numbers its passes.
    failedBeforePublish:
      Number(n) - 1 - records.filter((r) => r.ev === "pass.published" && Number(r.n) < Number(n)).length,
  };
  const hwmMiB: Record<string, number> = {};
  for (const { part, hwmKiB } of sampler.peaks.values()) hwmMiB[part] = Math.max(hwmMiB[part] ?? 0, mib(hwmKiB * 1024));
  if (failure) return { stages, warm: [], hwmMiB, counts, failure };
  const write = first("write", (r) => r.proc === "emulator" && r.at >= moved.edit);
  const rv = Number(write.rv);
  const warmListed = first("pass.listed", (r) => r.at >= moved.edit && Number(r.revision) >= rv);
  const m = warmListed.n;
  const warmStart = first("pass.start", (r) => r.n === m && r.at >= moved.edit);
  const warmRendered = first("pass.rendered", (r) => r.n === m && r.at >= moved.edit);
  const warmPublished = first("pass.published", (r) => r.n === m && r.at >= moved.edit);
  const warmKey = warmPublished.key;
  const warmPulled = first("pull.end", (r) => r.key === warmKey);
  const warmPullStart = [...records].reverse().find((r) => r.ev === "pull.start" && r.at <= warmPulled.at)!;
  const warmRuntime = first("runtime.done", (r) => r.key === warmKey);
  const warm = [
    row("PUT → stored, watch event, CloudEvent, pass starts", "stack", moved.edit, warmStart.at),
    row("list (paged, from the emulator)", "reconcile", warmStart.at, warmListed.at),
    row("build the model (warm)", "reconcile", warmListed.at, warmRendered.at, Number(warmRendered.buildMs)),
    row("render the config (warm)", "reconcile", warmListed.at, warmRendered.at, Number(warmRendered.renderMs)),
    row("publish to s3rver", "reconcile", warmRendered.at, warmPublished.at),
    row("published → agent pull starts", "agent", warmPublished.at, warmPullStart.at),
    row("agent pull (get, verify sha256)", "agent", warmPullStart.at, warmPulled.at),
    row("runtime API (no reload)", "haproxy", warmPulled.at, warmRuntime.at),
    row("runtime API done → client sees it", "haproxy", warmRuntime.at, moved.served),
    row("total: PUT → served", "reconcile", moved.edit, moved.served),
  ];
  return { stages, warm, hwmMiB, counts, failure };
}

/** Where the stack's console output of a size is kept. */
const logFile = (services: number) => join(tmpdir(), `bench-scale-${services}.log`);

/** The agent's last error if it is about checking or running the config (`haproxy -c`, HAProxy's start), from its /status. */
async function applyFailure(out: string): Promise<string | undefined> {
  const url = /agent (http:\/\/127\.0\.0\.1:\d+\/status)/.exec(out)?.[1];
  if (!url) return undefined;
  const status = (await fetch(url)
    .then((r) => r.json())
    .catch(() => ({}))) as { lastError?: { stage?: string; message?: string } | null };
  const error = status.lastError;
  return error?.stage === "apply" || error?.stage === "check" ? `${error.stage}: ${error.message}` : undefined;
}

/** Waits until no pass has started for a second (each pass.start has had its pass.end). */
async function waitQuiet(traceFile: string): Promise<void> {
  for (;;) {
    const records = readTrace(traceFile);
    // A head start traces pass.start and no pass.end (app/pass-trace.ts): only full passes count.
    const full = (r: TraceRecord) => r.step !== "head-start";
    const open =
      records.filter((r) => r.ev === "pass.start" && full(r)).length -
      records.filter((r) => r.ev === "pass.end").length;
    const last = records.at(-1)?.at ?? 0;
    if (open <= 0 && performance.timeOrigin + performance.now() - last > 1000) return;
    await sleep(200);
  }
}

/**
 * One EndpointSlice PUT to the API server, as kubectl sends it: the first endpoint of a Service in
 * the middle of the list moved to SPARE_HOST; then polls through HAProxy until it answers from there.
 */
async function moveEndpoint(root: string, services: number, port: number, httpPort: number) {
  const kubeconfig = parse(readFileSync(join(root, "data", "kubeconfig"), "utf8")) as {
    clusters: Array<{ cluster: { server: string } }>;
    users: Array<{ user: { token: string } }>;
  };
  const name = `svc-${Math.floor(services / 2)}`;
  const hosts = [SPARE_HOST, ...hostsOf(endpointsPerService).slice(1)];
  const moved = sliceOf(name, hosts, port) as { metadata: Record<string, unknown> };
  const edit = performance.timeOrigin + performance.now();
  const r = await fetch(
    `${kubeconfig.clusters[0]!.cluster.server}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/${name}-0`,
    {
      method: "PUT",
      headers: { authorization: `Bearer ${kubeconfig.users[0]!.user.token}`, "content-type": "application/json" },
      // Without the fixture's resourceVersion: an unconditional update, as bench/e2e's PUTs are.
      body: JSON.stringify({ ...moved, metadata: { ...moved.metadata, resourceVersion: undefined } }),
    },
  );
  if (!r.ok) throw new Error(`PUT ${name}: HTTP ${r.status} ${await r.text()}`);
  await r.arrayBuffer();
  const deadline = Date.now() + 120_000;
  for (;;) {
    // Round robin over the Service's endpoints: as many requests at once as it has slots in use reach each of them.
    const answers = await Promise.all(
      Array.from({ length: endpointsPerService + 1 }, () => httpGet(httpPort, `/${name}/`).catch(() => ({ body: "" }))),
    );
    if (answers.some((a) => a.body.includes(`${SPARE_HOST}:${port} `)))
      return { edit, served: performance.timeOrigin + performance.now() };
    if (Date.now() > deadline) throw new Error(`${name} not served from ${SPARE_HOST} after 120 s`);
    await sleep(5);
  }
}

async function main(): Promise<void> {
  const loadBefore = loadavg();
  const runs: Array<{ services: number; load: number[] } & Awaited<ReturnType<typeof runSize>>> = [];
  for (const services of sizes) {
    const r = await runSize(services);
    runs.push({ services, ...r, load: loadavg().map((l) => Math.round(l * 100) / 100) });
    // A size takes minutes: what it measured is kept even if a later size never finishes.
    writeFileSync(join(tmpdir(), `bench-scale-${services}.json`), `${JSON.stringify(runs.at(-1), null, 2)}\n`);
  }
  const result = {
    machine: machine(),
    endpointsPerService,
    checkInterval,
    loadBefore: loadBefore.map((l) => Math.round(l * 100) / 100),
    runs,
  };
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  console.log(`bench/scale — ${result.machine}`);
  console.log(
    `Services × ${endpointsPerService} endpoints through the local stack, first pass from a cold start; health checks every ${checkInterval}`,
  );
  console.log(
    `load average before ${result.loadBefore.join(", ")}; after each size: ${runs.map((r) => `${r.services}: ${r.load.join(", ")}`).join("; ")} (1, 5, 15 min)\n`,
  );
  const ratio = (a: number, b: number) => (Number.isFinite(a / b) && b > 0 ? `${(a / b).toFixed(1)}×` : "-");
  const headers = ["stage", "process"];
  for (const r of runs) headers.push(`${r.services}: ms`, `${r.services}: peak RSS MiB`);
  // Each size against the one before it: a linear stage's time ratio is the size ratio.
  for (let k = 1; k < runs.length; k++) {
    const [r, before] = [runs[k]!, runs[k - 1]!];
    headers.push(`time ${r.services}/${before.services} (size ${ratio(r.services, before.services)})`, "RSS ratio");
  }
  const cell = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? "-" : v);
  /** One table of stages, a column pair per size; a size whose stack got no further has "-" (and warm rows only if it got there). */
  const stageTable = (of: (r: (typeof runs)[number]) => StageRow[]) => {
    const template = runs.map(of).find((rows) => rows.length > 0) ?? [];
    return table(
      headers,
      template.map((st, i) => {
        const cells: Array<string | number> = [st.stage, st.part];
        for (const r of runs) cells.push(cell(of(r)[i]?.ms), cell(of(r)[i]?.peakRssMiB));
        runs.slice(1).forEach((r, k) => {
          const before = of(runs[k]!)[i];
          cells.push(
            ratio(of(r)[i]?.ms ?? NaN, before?.ms ?? NaN),
            ratio(of(r)[i]?.peakRssMiB ?? NaN, before?.peakRssMiB ?? NaN),
          );
        });
        return cells;
      }),
    );
  };
  console.log(stageTable((r) => r.stages));
  for (const r of runs)
    if (r.failure)
      console.log(
        `\n${r.services}: HAProxy does not run the config; the agent's last error: ${r.failure.split("\n").at(-1)}`,
      );
  console.log(
    "\nThen one endpoint moved (an EndpointSlice PUT to the API), on the warm stack, until a client is answered from it:\n",
  );
  console.log(stageTable((r) => r.warm));
  console.log(
    `\nUntil the last Service was routed (or HAProxy failed): ${runs.map((r) => `${r.services}: ${r.counts.passes} passes started, ${r.counts.failedBeforePublish} failed before the first publish, ${r.counts.watchEvents} watch events delivered`).join("; ")}`,
  );
  console.log(
    `The stacks' console output and each size's figures: ${runs.map((r) => `${logFile(r.services)}, .json`).join("; ")}`,
  );
  console.log(`\nPeak RSS of each process over the whole run (VmHWM, MiB; HAProxy: its largest process):\n`);
  const parts = [...new Set(runs.flatMap((r) => Object.keys(r.hwmMiB)))];
  console.log(
    table(
      ["process", ...runs.map((r) => String(r.services))],
      parts.map((p) => [p, ...runs.map((r) => r.hwmMiB[p] ?? "-")]),
    ),
  );
}

await main();
