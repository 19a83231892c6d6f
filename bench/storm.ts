/*
 * bench/storm: the watch storm of a big cluster (issue 29 §4). The event bridge starts its watch
 * on a cluster of N Services × E endpoints and, as Knative's ApiServerSource does, posts an ADDED
 * CloudEvent per object (2N of them) to the reconcile function. Measured: the time from the
 * watch's start to the first config published, each delivery's answer time (request to answer)
 * and how many deliveries failed, and the passes the function started and failed on the way.
 *
 * Each part is a process of its own, as in a cluster: the Kubernetes API emulator
 * (bench/kube-api-process.ts), s3rver, the reconcile function under functions-framework; the
 * bridge runs here, with at most --concurrency deliveries in flight (a Broker's dispatcher bounds
 * its parallelism too). No agent, no HAProxy: what is measured ends at the store.
 *   node dist/dev/bench/storm.js [--sizes 10000,50000] [--endpoints 10] [--concurrency 100]
 *     [--function dist/bundle] [--label after] [--max-minutes 30] [--json]
 * --function: the directory of the reconcile bundle to run (e.g. a copy of a previous build's
 * dist/bundle, to measure it in the same sitting).
 */

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { loadKubeConfig } from "../shared/adapters/kube-config.js";
import { createLogger } from "../shared/adapters/log.js";
import { packageRoot } from "../shared/adapters/templates.js";
import { startEventBridge } from "../shared/dev/event-bridge.js";
import { freePort, waitForPort } from "../shared/dev/ports.js";
import { arg, machine, percentile, table } from "./machine.js";
import { readTrace, type TraceRecord } from "./trace-file.js";

const argValue = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const sizes = argValue("--sizes", "10000,50000").split(",").map(Number);
const endpoints = arg("--endpoints", 10);
const concurrency = arg("--concurrency", 100);
const root = packageRoot();
const bundle = resolve(argValue("--function", join(root, "dist", "bundle")));
const label = argValue("--label", bundle);
/** Past this, a size stops where it got (what was not answered by then is counted as such). */
const GIVE_UP_MS = arg("--max-minutes", 30) * 60_000;
/** The run ends once every event is answered and the function has traced nothing for this long. */
const QUIET_MS = 3000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

function stop(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const kill = setTimeout(() => p.kill("SIGKILL"), 10_000);
    p.once("exit", () => {
      clearTimeout(kill);
      done();
    });
    p.kill("SIGTERM");
  });
}

/** A child that stops with this process (shared/dev/exit-with-parent.ts), its output to `log`. */
function child(args: string[], env: Record<string, string>, log: string): ChildProcess {
  const guard = new URL("../shared/dev/exit-with-parent.js", import.meta.url).href;
  const out = openSync(log, "a");
  return spawn(process.execPath, ["--import", guard, ...args], {
    env: { ...process.env, ...env },
    stdio: ["pipe", out, out],
  });
}

async function emulator(dir: string, services: number): Promise<{ p: ChildProcess; url: string }> {
  const p = spawn(
    process.execPath,
    [
      "--import",
      new URL("../shared/dev/exit-with-parent.js", import.meta.url).href,
      fileURLToPath(new URL("kube-api-process.js", import.meta.url)),
      "--services",
      String(services),
      "--endpoints",
      String(endpoints),
      "--target-port",
      "8080",
      "--dir",
      dir,
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const url = await new Promise<string>((ready, failed) => {
    createInterface({ input: p.stdout! }).on("line", (line) => {
      if (line.startsWith("ready ")) ready(line.slice(6));
    });
    p.once("exit", (code) => failed(new Error(`the API emulator exited (${code}) before it was ready`)));
  });
  return { p, url };
}

interface SizeResult {
  services: number;
  events: number;
  /** Objects the watch delivered an event for, and answered (by the end: GIVE_UP_MS at most). */
  answered: number;
  /** From the bridge's start to the first config the function published; NaN: none within GIVE_UP_MS. */
  firstPublishedMs: number;
  /** From the bridge's start to the last delivery's answer. */
  stormMs: number;
  answerMs: { p50: number; p99: number; max: number };
  /** Deliveries answered other than 2xx, or not answered (the bridge's 30 s timeout, a refused connection). */
  failedDeliveries: number;
  passes: number;
  /** Passes that failed (the function logged why). */
  failedPasses: number;
  /** Passes still under way when the run ended (at --max-minutes). */
  cutPasses: number;
  headStarts: number;
  /** Services in the last config published: every one of the cluster's when the storm's last change got through. */
  lastPublishedServices: number | undefined;
  load: number[];
}

async function runSize(services: number): Promise<SizeResult> {
  const dir = mkdtempSync(join(tmpdir(), "bench-storm-"));
  const traceFile = join(dir, "trace.ndjson");
  const fnLog = join(tmpdir(), `bench-storm-${services}-reconcile.log`);
  writeFileSync(fnLog, "");
  const parts: ChildProcess[] = [];
  const bridgeTrace: TraceRecord[] = [];
  let stopBridge = () => {};
  try {
    const api = await emulator(dir, services);
    parts.push(api.p);
    const s3Port = await freePort();
    parts.push(
      child(
        [
          join(root, "node_modules", "s3rver", "bin", "s3rver.js"),
          "--directory",
          join(dir, "s3"),
          "--address",
          "127.0.0.1",
          "--port",
          String(s3Port),
          "--silent",
          "--configure-bucket",
          "servicelb",
        ],
        {},
        join(dir, "s3rver.log"),
      ),
    );
    await waitForPort(s3Port, "s3rver");
    const fnPort = await freePort();
    parts.push(
      child(
        [
          join(root, "node_modules", "@google-cloud", "functions-framework", "build", "src", "main.js"),
          "--source",
          join(bundle, "reconcile.mjs"),
          "--target",
          "reconcile",
          "--signature-type",
          "cloudevent",
          "--port",
          String(fnPort),
        ],
        {
          SERVICELB_STORE: "s3://servicelb/storm",
          SERVICELB_STORE_ENDPOINT: `http://127.0.0.1:${s3Port}`,
          SERVICELB_STORE_PATH_STYLE: "true",
          AWS_ACCESS_KEY_ID: "S3RVER",
          AWS_SECRET_ACCESS_KEY: "S3RVER",
          AWS_REGION: "us-east-1",
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
          SERVICELB_KUBECONFIG: join(dir, "kubeconfig"),
          SERVICELB_TRACE_FILE: traceFile,
        },
        fnLog,
      ),
    );
    await waitForPort(fnPort, "reconcile function", 60_000);

    const t0 = now();
    stopBridge = startEventBridge({
      kc: loadKubeConfig({ kubeconfig: join(dir, "kubeconfig") }),
      sink: `http://127.0.0.1:${fnPort}/`,
      resyncMs: 3_600_000,
      concurrency,
      log: createLogger("bridge", "error"),
      trace: (ev, fields = {}) => bridgeTrace.push({ at: now(), proc: "bridge", ev, ...fields }),
    });
    const expected = 2 * services;
    const deadline = t0 + GIVE_UP_MS;
    let fn: TraceRecord[] = [];
    for (;;) {
      await sleep(1000);
      fn = readTrace(traceFile);
      const objects = bridgeTrace.filter((r) => r.ev === "delivered" && r.rv !== undefined).length;
      const quiet = now() - (fn.at(-1)?.at ?? 0) > QUIET_MS;
      if (objects >= expected && quiet) break;
      if (now() > deadline) break;
    }
    stopBridge();
    const deliveries = bridgeTrace.filter((r) => r.ev === "delivered");
    const ms = deliveries.map((r) => Number(r.ms));
    const last = deliveries.at(-1)?.at ?? NaN;
    const first = fn.find((r) => r.ev === "pass.published" && r.status === "published");
    const fullPasses = fn.filter((r) => r.ev === "pass.start" && r.step === undefined);
    const ended = new Set(fn.filter((r) => r.ev === "pass.end").map((r) => r.n));
    const logLines = readFileSync(fnLog, "utf8").split("\n");
    const reconciled = logLines.filter((l) => l.includes('"reconciled: published"'));
    const lastLine = reconciled.at(-1);
    return {
      services,
      events: bridgeTrace.filter((r) => r.ev === "event").length,
      answered: deliveries.filter((r) => r.rv !== undefined).length,
      firstPublishedMs: first ? Math.round(first.at - t0) : NaN,
      stormMs: Math.round(last - t0),
      answerMs: { p50: percentile(ms, 50), p99: percentile(ms, 99), max: Math.max(...ms) },
      failedDeliveries: deliveries.filter((r) => Number(r.status) < 200 || Number(r.status) >= 300).length,
      passes: fullPasses.length,
      failedPasses: logLines.filter((l) => l.includes('"msg":"reconcile failed at')).length,
      cutPasses:
        fullPasses.filter((r) => !ended.has(r.n)).length -
        logLines.filter((l) => l.includes('"msg":"reconcile failed at')).length,
      headStarts: fn.filter((r) => r.ev === "pass.start" && r.step === "head-start").length,
      lastPublishedServices: lastLine
        ? (JSON.parse(lastLine) as { counts?: { services?: number } }).counts?.services
        : undefined,
      load: loadavg().map((l) => Math.round(l * 100) / 100),
    };
  } finally {
    stopBridge();
    for (const p of parts.reverse()) await stop(p);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const loadBefore = loadavg().map((l) => Math.round(l * 100) / 100);
  const runs: SizeResult[] = [];
  for (const services of sizes) {
    runs.push(await runSize(services));
    writeFileSync(join(tmpdir(), `bench-storm-${services}.json`), `${JSON.stringify(runs.at(-1), null, 2)}\n`);
  }
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify({ machine: machine(), label, concurrency, loadBefore, runs }, null, 2)}\n`);
    return;
  }
  console.log(`bench/storm — ${machine()}`);
  console.log(
    `function: ${label}; ${endpoints} endpoints per Service; the bridge delivers ${concurrency} events at a time; load before ${loadBefore.join(", ")}\n`,
  );
  const s = (ms: number) => (Number.isFinite(ms) ? (ms / 1000).toFixed(1) : `not within ${GIVE_UP_MS / 60_000} min`);
  console.log(
    table(
      [
        "Services",
        "events (answered)",
        "watch start → first config published, s",
        "answer p50 / p99 / max, ms",
        "deliveries failed",
        "passes (failed, under way at the end)",
        "head starts",
        "last config: Services",
        "storm answered, s",
        "load after (1, 5, 15 min)",
      ],
      runs.map((r) => [
        r.services,
        `${r.events} (${r.answered})`,
        s(r.firstPublishedMs),
        `${r.answerMs.p50} / ${r.answerMs.p99} / ${r.answerMs.max}`,
        r.failedDeliveries,
        `${r.passes} (${r.failedPasses}, ${r.cutPasses})`,
        r.headStarts,
        r.lastPublishedServices ?? "-",
        s(r.stormMs),
        r.load.join(", "),
      ]),
    ),
  );
  console.log(
    `\nThe function's log: ${runs.map((r) => join(tmpdir(), `bench-storm-${r.services}-reconcile.log`)).join(", ")}`,
  );
}

await main();
