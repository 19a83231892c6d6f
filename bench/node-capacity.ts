/*
 * bench/node-capacity: what one node's HAProxy pays for a big cluster (issue 29 §3), side by side
 * in one run with the floor. N Services × E endpoints of the synthetic cluster (bench/synthetic.ts)
 * rendered by the real renderer, written as the agent writes them (haproxy.cfg, maps/, patterns/),
 * then, per variant, `haproxy -c` and a start of `haproxy -W` under `prlimit --nofile=<limit>`
 * (default 20,000, this machine's): time to a served request, the worker's RSS and descriptors.
 * Variants, taking turns each round:
 *   (a) as rendered: one free slot per backend beyond its endpoints, the spare backends;
 *   (b) floor: (a) without its free slots (one server line per ready endpoint, spares empty);
 *   (c) the previous release's slots: (a) with ⌈n/4⌉ more free slots in each backend of n
 *       endpoints (endpoints + ⌈n/4⌉ + 1, which every backend had before it could grow at runtime).
 * A variant that does not start says why (e.g. "Cannot raise FD limit").
 *   node dist/dev/bench/node-capacity.js [--sizes 1000,10000,50000] [--endpoints 10] [--rounds 2]
 *     [--nofile 20000] [--json]
 */

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { haproxyAvailable } from "../shared/adapters/haproxy/check.js";
import { loadTemplates } from "../shared/adapters/templates.js";
import { parseRenderOptions } from "../shared/core/settings/options.js";
import { renderSnapshot } from "../shared/core/render/pipeline.js";
import { Renderer } from "../shared/core/render/render.js";
import { snapshotFromDocuments } from "../shared/core/kubernetes/snapshot.js";
import { freePort, httpGet, waitFor } from "../test/support/net.js";
import { writeNodeFiles } from "./node-files.js";
import { arg, machine, mib, table } from "./machine.js";
import { syntheticCluster } from "./synthetic.js";
import { errorMessage } from "../shared/core/error-message.js";

const argValue = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const sizes = argValue("--sizes", "1000,10000,50000").split(",").map(Number);
const endpoints = arg("--endpoints", 10);
const rounds = arg("--rounds", 2);
const nofile = arg("--nofile", 20_000);
const START_TIMEOUT_MS = 600_000;

type Variant = "rendered" | "floor" | "previous";
const VARIANTS: Array<{ key: Variant; label: string }> = [
  { key: "rendered", label: "(a) as rendered" },
  { key: "floor", label: "(b) floor" },
  { key: "previous", label: "(c) previous slots" },
];

interface Run {
  services: number;
  round: number;
  variant: Variant;
  serverLines: number;
  configMiB: number;
  checkSeconds: number;
  /** null: it did not start (see `failure`). */
  startSeconds: number | null;
  rssMiB: number | null;
  descriptors: number | null;
  failure: string | null;
  load: number;
}

const FREE_SLOT = /^ {4}server s\d+ 127\.0\.0\.1:1 disabled$/;

/** (b): the config without its free slots. */
function floorOf(config: string): string {
  return config
    .split("\n")
    .filter((l) => !FREE_SLOT.test(l))
    .join("\n");
}

/** (c): each backend of n endpoints with ⌈n/4⌉ more free slots after its last. */
function previousOf(config: string): string {
  const out: string[] = [];
  let endpointsHere = 0;
  let slotsHere = 0;
  const close = () => {
    for (let k = 0; k < Math.ceil(endpointsHere / 4); k++)
      out.push(`    server s${slotsHere + k + 1} 127.0.0.1:1 disabled`);
    endpointsHere = 0;
    slotsHere = 0;
  };
  for (const line of config.split("\n")) {
    const server = line.startsWith("    server s");
    if (!server && slotsHere > 0) close();
    if (server) {
      slotsHere++;
      if (!FREE_SLOT.test(line)) endpointsHere++;
    }
    out.push(line);
  }
  close();
  return out.join("\n");
}

const serverLines = (config: string) => config.split("\n").filter((l) => l.startsWith("    server ")).length;

function check(cfg: string, dir: string): number {
  const t0 = performance.now();
  const r = spawnSync("prlimit", [`--nofile=${nofile}:${nofile}`, "haproxy", "-c", "-q", "-f", cfg], {
    cwd: dir,
    encoding: "utf8",
    maxBuffer: 64 * 2 ** 20,
  });
  if (r.status !== 0) throw new Error(`haproxy -c refused the config:\n${r.stdout}${r.stderr}`.slice(0, 2000));
  return (performance.now() - t0) / 1000;
}

const statusKiB = (pid: number, field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);

/** The worker of a master (its only child HAProxy). */
function workerOf(master: number): number | undefined {
  const r = spawnSync("pgrep", ["-P", String(master)], { encoding: "utf8" });
  return r.stdout
    .split("\n")
    .map(Number)
    .find((p) => p > 0);
}

async function start(
  cfg: string,
  dir: string,
  port: number,
): Promise<Pick<Run, "startSeconds" | "rssMiB" | "descriptors" | "failure">> {
  const t0 = performance.now();
  const child = spawn("prlimit", [`--nofile=${nofile}:${nofile}`, "haproxy", "-W", "-f", cfg], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (out += c.toString()));
  let exited = false;
  child.once("exit", () => (exited = true));
  try {
    // A path no Service claims: HAProxy answers it itself, so no pod (there are none) is waited for.
    await waitFor(
      "a request served",
      async () => {
        if (exited) return "exited";
        const r = await httpGet(port, "/no-service-here").catch(() => undefined);
        return r ? "served" : undefined;
      },
      START_TIMEOUT_MS,
    ).then((how) => {
      if (how === "exited") throw new Error(out.split("\n").find((l) => /ALERT/.test(l)) ?? out.slice(0, 300));
    });
    const startSeconds = (performance.now() - t0) / 1000;
    const worker = workerOf(child.pid!);
    if (!worker) throw new Error("no worker process");
    return {
      startSeconds,
      rssMiB: mib(statusKiB(worker, "VmRSS") * 1024),
      descriptors: readdirSync(`/proc/${worker}/fd`).length,
      failure: null,
    };
  } catch (err) {
    return { startSeconds: null, rssMiB: null, descriptors: null, failure: errorMessage(err).trim() };
  } finally {
    if (!exited) {
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
    }
    spawnSync("pkill", ["-9", "-f", cfg]);
  }
}

const load1 = () => Math.round(loadavg()[0]! * 100) / 100;
const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? "—" : (a / b).toFixed(2));
const fmt = (x: number | null, digits = 2) => (x === null ? "did not start" : x.toFixed(digits));

async function main(): Promise<void> {
  const version = await haproxyAvailable();
  if (!version) throw new Error("haproxy is not installed: apt-get install -y haproxy");
  const renderer = new Renderer(loadTemplates());
  const root = mkdtempSync(join(tmpdir(), "bench-node-capacity-"));
  const runs: Run[] = [];
  try {
    for (const services of sizes) {
      const port = await freePort();
      const options = parseRenderOptions({
        bindAddress: "127.0.0.1",
        httpPort: port,
        statsPort: await freePort(),
        statsSocket: join(root, "admin.sock"),
        serverStateFile: join(root, "server-state"),
      });
      const rendered = renderSnapshot(
        snapshotFromDocuments([syntheticCluster(services, endpoints)]),
        options,
        renderer,
      );
      const configs: Record<Variant, string> = {
        rendered: rendered.config,
        floor: floorOf(rendered.config),
        previous: previousOf(rendered.config),
      };
      for (let round = 1; round <= rounds; round++) {
        for (let k = 0; k < VARIANTS.length; k++) {
          const variant = VARIANTS[(round - 1 + k) % VARIANTS.length]!.key;
          const dir = join(root, variant);
          const cfg = writeNodeFiles(configs[variant], dir);
          const load = load1();
          const checkSeconds = check(cfg, dir);
          const started = await start(cfg, dir, port);
          const run: Run = {
            services,
            round,
            variant,
            serverLines: serverLines(configs[variant]),
            configMiB: mib(Buffer.byteLength(configs[variant])),
            checkSeconds,
            ...started,
            load,
          };
          runs.push(run);
          if (!process.argv.includes("--json"))
            console.error(
              `${services} services, round ${round}, ${variant}: check ${checkSeconds.toFixed(2)} s, start ${fmt(run.startSeconds)} s, RSS ${run.rssMiB ?? "-"} MiB, fds ${run.descriptors ?? "-"}${run.failure ? ` (${run.failure})` : ""}`,
            );
        }
      }
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  report(runs, version);
}

function report(runs: Run[], version: string): void {
  const label = (v: Variant) => VARIANTS.find((x) => x.key === v)!.label;
  const header = {
    machine: machine(),
    haproxy: version,
    limit: `nofile ${nofile}`,
    cluster: `synthetic, ${endpoints} endpoints per Service`,
  };
  // Per size and round, (a) and (c) against the floor of the same round.
  const ratios = runs
    .filter((r) => r.variant !== "floor")
    .map((r) => {
      const floor = runs.find((f) => f.services === r.services && f.round === r.round && f.variant === "floor")!;
      return {
        services: r.services,
        round: r.round,
        variant: r.variant,
        check: ratio(r.checkSeconds, floor.checkSeconds),
        start: ratio(r.startSeconds, floor.startSeconds),
        rss: ratio(r.rssMiB, floor.rssMiB),
        lines: ratio(r.serverLines, floor.serverLines),
      };
    });
  if (process.argv.includes("--json")) {
    console.log(JSON.stringify({ ...header, runs, ratios }, null, 2));
    return;
  }
  console.log(`\n${Object.values(header).join(" · ")}\n`);
  console.log(
    table(
      [
        "Services",
        "round",
        "config",
        "server lines",
        "MiB",
        "haproxy -c s",
        "start s",
        "worker RSS MiB",
        "worker fds",
        "load",
      ],
      runs.map((r) => [
        r.services.toLocaleString("en-US"),
        r.round,
        label(r.variant),
        r.serverLines.toLocaleString("en-US"),
        r.configMiB,
        r.checkSeconds.toFixed(2),
        r.failure ? `did not start: ${r.failure.slice(0, 60)}` : fmt(r.startSeconds),
        r.rssMiB ?? "—",
        r.descriptors ?? "—",
        r.load,
      ]),
    ),
  );
  console.log("\nAgainst the floor of the same round:\n");
  console.log(
    table(
      ["Services", "round", "config", "lines ×", "haproxy -c ×", "start ×", "RSS ×"],
      ratios.map((r) => [
        r.services.toLocaleString("en-US"),
        r.round,
        label(r.variant),
        r.lines,
        r.check,
        r.start,
        r.rss,
      ]),
    ),
  );
}

await main();
