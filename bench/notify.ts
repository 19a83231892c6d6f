/*
 * bench/notify: the reconcile function's notifier (adapters/notifier.ts) pinging N agents — issue
 * 30 §2's "1,000 agents pinged in ≤ 1 s from one instance" — with nothing else loading the
 * machine: the receivers (notify-receivers.ts) are the agent's own HTTP API with nothing behind
 * /notify, in processes of their own (--receiver-processes), each agent on a port of its own. Per
 * concurrency and round: the notify call's time, and from its start to each agent's receipt of its
 * ping (p50 / p99 / max), with what the notifier reported. Each round after the first finds the
 * connections of the one before kept alive (as a change a second after another does); the first
 * opens N connections.
 *   node dist/dev/bench/notify.js [--agents 1000] [--concurrency 16,64,128] [--rounds 3]
 *     [--deadline-ms 5000] [--receiver-processes 1] [--json]
 */

import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { createNotifier, type NotifyReport } from "../shared/adapters/notifier.js";
import { arg, machine, percentile, table } from "./machine.js";
import type { ReceiverMessage, ReceiverRequest } from "./notify-receivers.js";

const argText = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const agents = arg("--agents", 1000);
const rounds = arg("--rounds", 3);
const deadlineMs = arg("--deadline-ms", 5000);
const receiverProcesses = arg("--receiver-processes", 1);
const concurrencies = argText("--concurrency", "16,64,128").split(",").map(Number);
const json = process.argv.includes("--json");

interface Receivers {
  child: ChildProcess;
  urls: string[];
  ask(m: ReceiverRequest, answer: ReceiverMessage["type"]): Promise<ReceiverMessage>;
}

async function startReceivers(count: number, token: string): Promise<Receivers> {
  const child = fork(fileURLToPath(new URL("./notify-receivers.js", import.meta.url)), { stdio: "inherit" });
  const ask = (m: ReceiverRequest, answer: ReceiverMessage["type"]) =>
    new Promise<ReceiverMessage>((resolve) => {
      const on = (reply: ReceiverMessage) => {
        if (reply.type !== answer) return;
        child.off("message", on);
        resolve(reply);
      };
      child.on("message", on);
      child.send(m);
    });
  const started = await ask({ type: "start", count, token }, "started");
  return { child, urls: started.type === "started" ? started.urls : [], ask };
}

interface Row {
  concurrency: number;
  round: number;
  totalMs: number;
  /** The notifying process's CPU during the round. */
  cpuMs: number;
  p50: number;
  p99: number;
  max: number;
  received: number;
  ok: number;
  failed: number;
  unpinged: number;
  firstFailure: string;
  load: string;
}

const round1 = (n: number) => Math.round(n * 10) / 10;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");

async function main(): Promise<void> {
  const token = randomBytes(24).toString("base64url");
  const share = Math.ceil(agents / receiverProcesses);
  const receivers: Receivers[] = [];
  for (let i = 0; i < receiverProcesses; i++)
    receivers.push(await startReceivers(Math.min(share, agents - i * share), token));
  const urls = receivers.flatMap((r) => r.urls);
  const loadBefore = load();
  const rows: Row[] = [];
  try {
    for (const concurrency of concurrencies) {
      const notifier = createNotifier(
        { agents: urls, token, concurrency, deadlineMs, timeoutMs: 2000 },
        pino({ level: "silent" }),
      );
      for (let r = 1; r <= rounds; r++) {
        const cpu = process.cpuUsage();
        const start = performance.timeOrigin + performance.now();
        const report: NotifyReport = await notifier.notify({
          // A key and digest the agents' schema takes (agent/http-api.ts).
          key: `fleet/configs/000000-${String(r).padStart(20, "0")}-0000000000-e642e1af4cd1ef8d.cfg`,
          sha256: "0".repeat(64),
          revision: String(r),
        });
        const totalMs = performance.timeOrigin + performance.now() - start;
        const used = process.cpuUsage(cpu);
        const arrivals: number[] = [];
        for (const rc of receivers) {
          const reply = await rc.ask({ type: "arrivals" }, "arrivals");
          if (reply.type === "arrivals") arrivals.push(...reply.at.map((at) => at - start));
        }
        rows.push({
          concurrency,
          round: r,
          totalMs: round1(totalMs),
          cpuMs: round1((used.user + used.system) / 1000),
          p50: round1(percentile(arrivals, 50)),
          p99: round1(percentile(arrivals, 99)),
          max: round1(Math.max(...arrivals)),
          received: arrivals.length,
          ok: report.ok,
          failed: report.failed,
          unpinged: report.unpinged,
          firstFailure: report.failures[0]?.error ?? "",
          load: load(),
        });
        if (!json) console.error(JSON.stringify(rows.at(-1)));
        // Apart from the next round: the receivers have answered and counted.
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    for (const rc of receivers) {
      await rc.ask({ type: "stop" }, "stopped");
    }
  }
  const out = { machine: machine(), agents, receiverProcesses, deadlineMs, loadBefore, rows };
  if (json) {
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return;
  }
  console.log(`bench/notify — ${machine()}`);
  console.log(
    `${agents} agents' HTTP APIs in ${receiverProcesses} process(es) on loopback, one port each; deadline ${deadlineMs} ms; load before ${loadBefore}\n`,
  );
  console.log(
    table(
      [
        "concurrency",
        "round",
        "notify ms",
        "notifier CPU ms",
        "received p50 ms",
        "p99",
        "max",
        "received",
        "ok",
        "failed",
        "unpinged",
        "first failure",
        "load",
      ],
      rows.map((r) => [
        r.concurrency,
        r.round,
        r.totalMs,
        r.cpuMs,
        r.p50,
        r.p99,
        r.max,
        r.received,
        r.ok,
        r.failed,
        r.unpinged,
        r.firstFailure,
        r.load,
      ]),
    ),
  );
}

await main();
