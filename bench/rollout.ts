import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { haproxyAvailable } from "../shared/adapters/haproxy/check.js";
import { createObjectStore, type ObjectStore } from "../shared/adapters/store.js";
import { echoBackend, freePort, waitFor } from "../test/support/net.js";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";
import { arg, machine, percentile, table } from "./machine.js";

/**
 * bench/rollout: on the 3-node local stack (`npm start -- --nodes 3`: three agents, each with its
 * own HAProxy, the reconcile function stepping the canary rollout on every pass), the time from
 * the publish of a change that needs a reload
 *   - good (the api Service's lb.timeout-server changed): to the canary running it, and to every
 *     node running it with rollout.json promoting it (fleet-wide);
 *   - bad (a rate limit of 1 request a second answered 503: a valid config that fails requests):
 *     to the canary's gate failing and the canary back on the stable config (rolled back);
 * with a client sending requests through every node's HAProxy meanwhile, whose 5xx are counted
 * per node. The stack's own canary settings (waves 1,100%, bake 20 s, 20 requests) unless
 * SERVICELB_CANARY_* variables say otherwise; its passes come every --resync ms, as PingSource's.
 *   node dist/dev/bench/rollout.js [--runs 2] [--resync 2000] [--json]
 */

const NODES = ["node-1", "node-2", "node-3"];
const ADDRESSES = ["127.0.1.1", "127.0.1.2", "127.0.1.3"];
const HOST = "api.example.com";
const ANNOTATION = `serviceloadbalancer/lb.host: ${HOST}`;

/** The process `npm start` runs, in the development build beside this one. */
const LOCAL_STACK_ENTRY = fileURLToPath(new URL("../shared/dev/main.js", import.meta.url));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function get(host: string, port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host, port, path: "/", headers: { host: HOST }, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
    req.setTimeout(5000, () => req.destroy());
    req.end();
  });
}

interface Run {
  change: "good" | "bad";
  /** From the function's publish: the canary runs it. */
  canaryMs: number;
  /** Good: every node runs it and rollout.json promoted it. Bad: the canary back on stable. */
  doneMs: number;
  /** 5xx (and failed requests) while it rolled out, by node. */
  errors: Record<string, number>;
  requests: number;
}

async function main(): Promise<void> {
  // The development Node may be 20: the SDK's notice about its 2027 releases is not this bench's output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";
  const haproxy = await haproxyAvailable();
  if (!haproxy) throw new Error("haproxy is not installed: apt-get install -y haproxy");
  const runs = arg("--runs", 2);
  const resync = arg("--resync", 2000);
  const dir = mkdtempSync(join(tmpdir(), "bench-rollout-"));
  const api = await echoBackend("api");
  const [httpPort, statsPort] = [await freePort(), await freePort()];
  const file = join(dir, "cluster.yaml");
  const cluster = readFileSync(join(import.meta.dirname, "..", "..", "..", "examples", "cluster.yaml"), "utf8")
    .replaceAll("18182", String(api.port))
    .replaceAll("18181", String(await freePort()));
  writeFileSync(file, cluster);
  const data = join(dir, "data");
  const stack = spawn(
    process.execPath,
    [
      LOCAL_STACK_ENTRY,
      ...["--demo", "--nodes", "3", "--cluster-file", file, "--data-dir", data, "--log-format", "json"],
      ...["--http-port", String(httpPort), "--stats-port", String(statsPort), "--resync", String(resync)],
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  /** When the function published each key (its log's time). */
  const publishedAt = new Map<string, number>();
  stack.stdout.on("data", (c: Buffer) => (out += c.toString()));
  let partial = "";
  /** The stack's last log lines, for a start that fails. */
  const recent: string[] = [];
  /** The function's rollout events, for a change that does not go as expected. */
  const rolloutEvents: string[] = [];
  stack.stderr.on("data", (c: Buffer) => {
    const lines = (partial + c.toString()).split("\n");
    partial = lines.pop()!;
    recent.push(...lines);
    recent.splice(0, recent.length - 20);
    for (const line of lines) {
      if (line.includes('"msg":"rollout')) rolloutEvents.push(line);
      const m = /"time":(\d+),.*"status":"published".*?"key":"([^"]+)"/.exec(line);
      if (m) publishedAt.set(m[2]!, Number(m[1]));
    }
  });
  let running = true;
  const exited = new Promise<void>((resolve) =>
    stack.on("exit", () => {
      running = false;
      resolve();
    }),
  );
  let store: ObjectStore | undefined;
  const loadBefore = loadavg()[0]!;
  try {
    await waitFor(
      "the stack's summary",
      async () => {
        if (!running) throw new Error("the stack exited");
        return out.includes("Ctrl-C stops everything.") ? true : undefined;
      },
      90_000,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n${out}\n${recent.join("\n")}`);
    });
    const canary = NODES.find((n) => out.split("\n").some((l) => l.includes(`${n} (canary)`)))!;
    const settings = /goes out in (waves .*? requests)/.exec(out)?.[1] ?? "";
    store = createObjectStore({
      url: "s3://servicelb/local",
      endpoint: /s3rver at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!,
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
    });
    const s = store;
    await waitFor(
      "every node's report",
      async () => ((await s.listStatuses()).length === 3 ? true : undefined),
      30_000,
    );
    const configOf = (n: string) => readFileSync(join(data, n, "haproxy", "haproxy.cfg"), "utf8");

    const results: Run[] = [];
    const withEvents = (err: unknown) =>
      new Error(`${(err as Error).message}\nrollout events:\n${rolloutEvents.join("\n")}`);
    for (let i = 0; i < runs; i++) {
      for (const change of ["good", "bad"] as const) {
        const stable = (await s.getRollout())!.stable.key;
        const line =
          change === "good"
            ? `serviceloadbalancer/lb.timeout-server: ${40 + results.length}s`
            : "serviceloadbalancer/lb.rate-limit-rps: '1'\n        serviceloadbalancer/lb.rate-limit-status: '503'";
        const marker = change === "good" ? `timeout server ${40 + results.length}s` : "deny_status 503";
        const counts: Record<string, number> = Object.fromEntries(NODES.map((n) => [n, 0]));
        let requests = 0;
        let sending = true;
        const load = (async () => {
          while (sending) {
            await Promise.all(
              ADDRESSES.map(async (a, k) => {
                const status = await get(a, httpPort);
                requests++;
                if (status === 0 || status >= 500) counts[NODES[k]!]!++;
              }),
            );
            await sleep(20);
          }
        })();
        await sleep(1000);
        const current = readFileSync(file, "utf8");
        // One timeout annotation at a time: a key twice in the YAML map makes the demo cluster refuse
        // the file. A bad change keeps the run's timeout, so that it is not the config rejected in
        // the run before (which the rollout would rightly not try again).
        const without =
          change === "good" ? current.replace(/\n {8}serviceloadbalancer\/lb\.timeout-server: \d+s/, "") : current;
        writeFileSync(file, without.replace(ANNOTATION, `${ANNOTATION}\n        ${line}`));
        const key = await waitFor(
          "the change published",
          async () => {
            const newest = (await s.newest()).config?.key;
            return newest && newest !== stable && publishedAt.has(newest) ? newest : undefined;
          },
          30_000,
        ).catch((err: unknown) => {
          throw withEvents(err);
        });
        const t0 = publishedAt.get(key)!;
        const canaryAt = await waitFor(
          "the canary on it",
          async () => (configOf(canary).includes(marker) ? Date.now() : undefined),
          60_000,
        ).catch((err: unknown) => {
          throw withEvents(err);
        });
        const doneAt =
          change === "good"
            ? await waitFor(
                "fleet-wide",
                async () =>
                  NODES.every((n) => configOf(n).includes(marker)) && (await s.getRollout())?.stable.key === key
                    ? Date.now()
                    : undefined,
                300_000,
              )
            : await waitFor(
                "rolled back",
                async () =>
                  !configOf(canary).includes(marker) && (await s.getRollout())?.rollout?.state === "failed"
                    ? Date.now()
                    : undefined,
                300_000,
              );
        sending = false;
        await load;
        results.push({ change, canaryMs: canaryAt - t0, doneMs: doneAt - t0, errors: counts, requests });
        // Back to the file as it was: the bad change leaves the fleet on stable; a good one stays.
        if (change === "bad") writeFileSync(file, current);
        await sleep(2 * resync + 2000);
      }
    }

    const result = {
      machine: machine(),
      haproxy,
      nodes: 3,
      canary,
      settings,
      resyncMs: resync,
      loadAverage: [loadBefore, loadavg()[0]!].map((l) => Math.round(l * 10) / 10),
      runs: results,
    };
    if (process.argv.includes("--json")) {
      console.log(JSON.stringify(result, null, 2));
      return;
    }
    console.log(`bench/rollout — ${result.machine}, HAProxy ${haproxy}`);
    console.log(
      `3-node local stack, canary ${canary}; ${settings}; a pass every ${resync} ms; publish: the end of the function's pass that published it; 1-minute load average ${result.loadAverage.join(" → ")}\n`,
    );
    const s2 = (ms: number) => (ms / 1000).toFixed(1);
    const rows = (["good", "bad"] as const).map((change) => {
      const mine = results.filter((r) => r.change === change);
      const done = mine.map((r) => r.doneMs);
      return [
        change === "good" ? "good change → fleet-wide" : "bad change → rolled back",
        mine.map((r) => s2(r.canaryMs)).join(", "),
        mine.map((r) => s2(r.doneMs)).join(", "),
        done.length > 1 ? `p50 ${s2(percentile(done, 50))}` : s2(done[0]!),
        NODES.map((n) => `${n}: ${mine.reduce((a, r) => a + r.errors[n]!, 0)}`).join(", "),
      ];
    });
    console.log(
      table(
        ["change", "publish → canary runs it, s", "publish → done, s", "done", "5xx or failed (requests to each node)"],
        rows,
      ),
    );
  } finally {
    store?.close();
    stack.kill("SIGINT");
    await exited;
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
