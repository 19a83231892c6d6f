/*
 * bench/framework-domain: what functions-framework's per-request domain costs the code on its
 * thread (shared/adapters/function-thread.ts). The same store requests (a ListObjectsV2 of a
 * small prefix and a 1 KB PutObject, the AWS SDK against s3rver on loopback) from a fresh child
 * process each round, three ways side by side, taking turns:
 *   - no Domain in the process;
 *   - in a Domain, as the framework runs each request's handler (reconcile before it moved to a
 *     worker thread);
 *   - from a handler in a Domain, the requests on a worker thread (reconcile now).
 *   node dist/dev/bench/framework-domain.js [--requests 300] [--rounds 5] [--json]
 * The CPU column is the child process's (every thread) over the requests, per request pair.
 */
import { spawn } from "node:child_process";
import domain from "node:domain";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { S3RVER_CREDENTIALS, startS3 } from "../test/support/s3.js";
import { arg, machine, percentile, table } from "./machine.js";

const MODES = {
  none: "no Domain in the process",
  thread: "requests in a Domain, on its thread",
  worker: "a Domain's handler, requests on a worker thread",
} as const;
type Mode = keyof typeof MODES;
interface Cost {
  cpuMs: number;
  wallMs: number;
}
interface Job {
  endpoint: string;
  bucket: string;
  requests: number;
}

/** The requests, per pair: the process's CPU (every thread; the others idle meanwhile) and wall time. */
async function requests({ endpoint, bucket, requests: n }: Job): Promise<Cost> {
  const client = new S3Client({ endpoint, region: "us-east-1", forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
  const body = Buffer.alloc(1024, 97);
  const pair = (i: number) =>
    Promise.all([
      client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "bench/", MaxKeys: 10 })),
      client.send(new PutObjectCommand({ Bucket: bucket, Key: `bench/${i % 10}`, Body: body })),
    ]);
  for (let i = 0; i < 20; i++) await pair(i);
  const t = performance.now();
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) await pair(i);
  const used = process.cpuUsage(cpu);
  const wallMs = performance.now() - t;
  client.destroy();
  return { cpuMs: (used.user + used.system) / 1000 / n, wallMs: wallMs / n };
}

/** One round in this child process. The framework runs each request's handler in its own domain. */
async function child(mode: Mode, job: Job): Promise<void> {
  const run = (): Promise<Cost> => {
    if (mode === "none") return requests(job);
    const d = domain.create();
    d.on("error", (err) => console.error(err));
    return d.run(() =>
      mode === "thread"
        ? requests(job)
        : new Promise<Cost>((done, failed) => {
            const w = new Worker(new URL(import.meta.url), { workerData: job });
            w.once("message", done);
            w.once("error", failed);
          }),
    );
  };
  process.stdout.write(JSON.stringify(await run()));
}

function round(mode: Mode, job: Job): Promise<Cost> {
  return new Promise((done, failed) => {
    const p = spawn(process.execPath, [fileURLToPath(import.meta.url), "--child", mode, JSON.stringify(job)], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    });
    let out = "";
    p.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
    });
    p.on("exit", (code) => (code === 0 ? done(JSON.parse(out)) : failed(new Error(`${mode} round exited ${code}`))));
  });
}

async function main(): Promise<void> {
  const rounds = arg("--rounds", 5);
  const s3 = await startS3();
  const job: Job = { endpoint: s3.endpoint, bucket: s3.bucket, requests: arg("--requests", 300) };
  const load = loadavg()[0]!;
  const results = new Map<Mode, Cost[]>();
  try {
    for (let r = 0; r < rounds; r++)
      for (const mode of Object.keys(MODES) as Mode[])
        results.set(mode, [...(results.get(mode) ?? []), await round(mode, job)]);
  } finally {
    await s3.stop();
  }
  const median = (xs: number[]) => percentile(xs, 50);
  const rows = (Object.keys(MODES) as Mode[]).map((mode) => {
    const rs = results.get(mode)!;
    return {
      mode,
      what: MODES[mode],
      cpuMsPerPair: Math.round(median(rs.map((r) => r.cpuMs)) * 100) / 100,
      wallMsPerPair: Math.round(median(rs.map((r) => r.wallMs)) * 100) / 100,
    };
  });
  if (process.argv.includes("--json")) {
    console.log(JSON.stringify({ machine: machine(), load, rounds, requests: job.requests, rows }, null, 2));
    return;
  }
  console.log(`bench/framework-domain — ${machine()}; load average ${load.toFixed(2)} at the start`);
  console.log(
    `${job.requests} request pairs (ListObjectsV2 + 1 KB PutObject, AWS SDK → s3rver) per round, ${rounds} rounds, median of rounds:\n`,
  );
  console.log(
    table(
      ["process", "child CPU per pair", "wall per pair"],
      rows.map((r) => [r.what, `${r.cpuMsPerPair.toFixed(2)} ms`, `${r.wallMsPerPair.toFixed(2)} ms`]),
    ),
  );
}

if (!isMainThread) parentPort!.postMessage(await requests(workerData as Job));
else if (process.argv[2] === "--child") await child(process.argv[3] as Mode, JSON.parse(process.argv[4]!) as Job);
else await main();
