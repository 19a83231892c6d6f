import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../shared/adapters/templates.js";
import { KubeApiEmulator } from "../shared/dev/kube-api-emulator.js";
import { freePort } from "../test/support/net.js";
import { startS3 } from "../test/support/s3.js";
import { machine, percentile, table } from "./machine.js";
import { syntheticCluster } from "./synthetic.js";

/**
 * bench/reconcile: the deployed `reconcile` function (functions-framework, its own process) against
 * the Kubernetes API protocol fake and s3rver on loopback: cold start, then one invocation per
 * cluster size with the time of each stage and the function process's peak RSS.
 *   node dist/dev/bench/reconcile.js [--json] [--sizes 1000,10000] [--starts 3] [--heap-mib 160]
 */
const ENDPOINTS = 10;

interface Row {
  services: number;
  run: string;
  status: string;
  list: number;
  build: number;
  render: number;
  publish: number;
  notify: number;
  totalMs: number;
  peakRssMiB: number;
}

/** CPU time (user + system) the process has used so far: less sensitive to a busy machine than wall time. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  // utime and stime, fields 14 and 15 of proc(5), in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
}

async function postEvent(port: number, type: string, data: unknown): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${port}/`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-id": `bench-${Date.now()}-${Math.random()}`,
      "ce-source": "/apis/v1/namespaces/servicelb/pingsources/resync",
      "ce-type": type,
    },
    body: JSON.stringify(data),
  });
  await r.arrayBuffer();
  return r.status;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const sizesArg = args[args.indexOf("--sizes") + 1];
  const sizes = (args.includes("--sizes") && sizesArg ? sizesArg : "1000,10000").split(",").map(Number);
  const starts = Number(args.includes("--starts") ? args[args.indexOf("--starts") + 1] : 3);
  const heapCapMiB = Number(args.includes("--heap-mib") ? args[args.indexOf("--heap-mib") + 1] : 160);
  const api = await new KubeApiEmulator().start();
  const s3 = await startS3("bench");
  const kubeconfig = await api.writeKubeconfig();
  const ffBin = join(packageRoot(), "node_modules", "@google-cloud", "functions-framework", "build", "src", "main.js");
  const env = {
    ...process.env,
    SERVICELB_KUBECONFIG: kubeconfig,
    SERVICELB_STORE: `s3://${s3.bucket}/bench`,
    SERVICELB_STORE_ENDPOINT: s3.endpoint,
    SERVICELB_STORE_PATH_STYLE: "true",
    AWS_ACCESS_KEY_ID: "S3RVER",
    AWS_SECRET_ACCESS_KEY: "S3RVER",
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
    LOG_LEVEL: "info",
    // As deployed (infra/): a heap cap that fits the container, so V8 collects before it grows.
    NODE_OPTIONS: `--max-old-space-size=${heapCapMiB}`,
  };

  /** Starts the function from `source`; cold start = process start → first request served. */
  async function startFunction(source: string) {
    const port = await freePort();
    const started = performance.now();
    const child: ChildProcess = spawn(
      process.execPath,
      [
        ffBin,
        "--source",
        join(packageRoot(), source),
        "--target",
        "reconcile",
        "--signature-type",
        "cloudevent",
        "--port",
        String(port),
      ],
      {
        env,
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    const logs: Array<Record<string, unknown>> = [];
    let buffered = "";
    child.stderr!.on("data", (c: Buffer) => {
      buffered += c.toString();
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // functions-framework's banner is plain text; only JSON lines are log records.
        }
      }
    });
    for (;;) {
      try {
        if ((await postEvent(port, "dev.example.unknown", {})) >= 200) break;
      } catch {
        if (performance.now() - started > 20_000) throw new Error(`${source} did not start in 20 s`);
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    return { child, port, logs, coldStartMs: Math.round(performance.now() - started), cpuMs: cpuMs(child.pid!) };
  }

  const coldStarts: Array<{ source: string; coldStartMs: number; cpuMs: number; rssMiB: number }> = [];
  for (const source of ["dist/functions/reconcile.js", "dist/bundle/reconcile.mjs"]) {
    for (let i = 0; i < starts; i++) {
      const f = await startFunction(source);
      coldStarts.push({ source, coldStartMs: f.coldStartMs, cpuMs: f.cpuMs, rssMiB: peakRssMiB(f.child.pid!) });
      f.child.kill("SIGTERM");
      await new Promise((r) => f.child.once("exit", r));
    }
  }
  const { child, port, logs, coldStartMs } = await startFunction("dist/bundle/reconcile.mjs");

  const rows: Row[] = [];
  try {
    for (const n of sizes) {
      const cluster = syntheticCluster(n, ENDPOINTS) as { items: Array<{ kind: string }> };
      for (const item of cluster.items) api.upsert(item.kind as "Service" | "EndpointSlice", item as never);
      for (const run of ["changed", "unchanged"]) {
        const before = logs.length;
        const t0 = performance.now();
        const status = await postEvent(port, "dev.knative.sources.ping", {});
        const totalMs = Math.round(performance.now() - t0);
        if (status >= 300) throw new Error(`reconcile answered ${status}: ${JSON.stringify(logs.slice(before))}`);
        // The log line may reach the pipe just after the response.
        const found = () => logs.slice(before).find((l) => typeof l.msg === "string" && l.msg.startsWith("reconciled"));
        for (let waited = 0; !found() && waited < 2000; waited += 20) await new Promise((r) => setTimeout(r, 20));
        const rec = found() as { status?: string; durationsMs?: Record<string, number> } | undefined;
        const d = rec?.durationsMs ?? {};
        rows.push({
          services: n,
          run,
          status: rec?.status ?? "?",
          list: d.list ?? NaN,
          build: d.build ?? NaN,
          render: d.render ?? NaN,
          publish: d.publish ?? NaN,
          notify: d.notify ?? NaN,
          totalMs,
          peakRssMiB: peakRssMiB(child.pid!),
        });
      }
    }
  } finally {
    child.kill("SIGTERM");
    await api.stop();
    await s3.stop();
  }
  if (args.includes("--json")) {
    process.stdout.write(`${JSON.stringify({ machine: machine(), heapCapMiB, coldStarts, rows }, null, 2)}\n`);
    return;
  }
  console.log(`bench/reconcile — ${machine()}`);
  console.log(
    `function cold start (process start → first request served), ${starts} starts each; heap cap --max-old-space-size=${heapCapMiB}\n`,
  );
  console.log(
    table(
      ["source", "cold start ms", "CPU ms", "RSS after MiB"],
      coldStarts.map((c) => [c.source, c.coldStartMs, c.cpuMs, c.rssMiB]),
    ),
  );
  for (const source of new Set(coldStarts.map((c) => c.source))) {
    const ms = coldStarts.filter((c) => c.source === source).map((c) => c.coldStartMs);
    console.log(
      `${source}: cold start median ${percentile(ms, 50)} ms, min ${Math.min(...ms)}, max ${Math.max(...ms)}`,
    );
  }
  console.log(
    `\nOne invocation per row, from dist/bundle/reconcile.mjs (cold start of this instance: ${coldStartMs} ms):\n`,
  );
  console.log(
    table(
      [
        "services",
        "run",
        "status",
        "list ms",
        "build ms",
        "render ms",
        "publish ms",
        "notify ms",
        "request ms",
        "peak RSS MiB",
      ],
      rows.map((r) => [
        r.services,
        r.run,
        r.status,
        r.list,
        r.build,
        r.render,
        r.publish,
        r.notify,
        r.totalMs,
        r.peakRssMiB,
      ]),
    ),
  );
  console.log(
    `\nN HTTP services × ${ENDPOINTS} endpoints; API server: the Kubernetes API emulator (shared/dev) paging 500 per request; store: s3rver. Peak RSS is the function process's VmHWM after the row (cumulative).`,
  );
}

await main();
