/*
 * bench/dataplane: what the rendered config costs the data plane in server connection reuse
 * (issue 29 §1). The config `servicelb render` emits for one HTTP Service with two endpoints,
 * on loopback, in front of two pods that are not the bottleneck (one HAProxy, one thread, that
 * answers `200 ok` itself on 127.0.0.2 and 127.0.0.3, keep-alive), loaded with
 * `wrk -t1 -c<connections> -d<seconds>s`. Three variants, side by side in one run, their order
 * rotated each round:
 *   (a) the config as rendered;
 *   (b) HAProxy's default reuse: (a) with every `pool-max-conn …` and `http-reuse …` removed
 *       (the same text as (a) while the template sets neither; computed, so that the row stays
 *       honest if the template changes);
 *   (c) the previous release: (b) with `pool-max-conn 0` on http_defaults' `default-server` line.
 * Beside req/s and wrk's mean latency: the connections the pods accepted during wrk's run (their
 * HAProxy's CumConns; health checks, a new connection every 500 ms per server, add ~4 a second
 * whatever the variant), and the sockets in TIME_WAIT at the pods' port when wrk ends
 * (`ss -tan state time-wait`, either end at the pods' port: the LB's side by destination port, the
 * pods' by source port). Each run has its pods on a fresh port, so the count is that run's alone.
 * HAProxy 2.6 ends a server connection it does not keep with a reset (nstat: one TcpOutRsts per
 * request under (c)), so TIME_WAIT stays at 0 in every variant on this setup (and with Node's
 * http server as the pods): the connection count is the figure that shows the cost.
 *   node dist/dev/bench/dataplane.js [--rounds 3] [--seconds 8] [--connections 32] [--json]
 */

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { loadTemplates } from "../shared/adapters/templates.js";
import { renderSnapshot } from "../shared/core/render/pipeline.js";
import { Renderer } from "../shared/core/render/render.js";
import { snapshotFromDocuments } from "../shared/core/kubernetes/snapshot.js";
import { web } from "../test/support/agent.js";
import { list } from "../test/support/fixtures.js";
import { loopbackOptions, runHaproxy, type RunningHaproxy } from "../test/support/haproxy.js";
import { freePort, httpGet, waitFor } from "../test/support/net.js";
import { arg, machine, table } from "./machine.js";
import { cumConns, PODS, load1, parseWrk, podConfig, requireLoadTools, wrk } from "./wrk-load.js";

const rounds = arg("--rounds", 3);
const seconds = arg("--seconds", 8);
const connections = arg("--connections", 32);

type Variant = "rendered" | "default reuse" | "pool-max-conn 0";
const VARIANTS: Array<{ key: Variant; label: string }> = [
  { key: "rendered", label: "(a) as rendered" },
  { key: "default reuse", label: "(b) HAProxy's default reuse" },
  { key: "pool-max-conn 0", label: "(c) previous release: pool-max-conn 0" },
];

interface Run {
  round: number;
  variant: Variant;
  reqPerSec: number;
  latencyMs: number;
  /** Connections the pods accepted during wrk's run (health checks included). */
  podConnections: number;
  /** Sockets in TIME_WAIT with either end at the pods' port when wrk ends. */
  timeWait: number;
  /** wrk's socket errors plus non-2xx/3xx answers. */
  errors: number;
  /** 1-minute load average when the run started. */
  load: number;
}

/** (b): the rendered config without any server connection reuse setting, i.e. HAProxy's defaults. */
function withDefaultReuse(config: string): string {
  return config
    .split("\n")
    .filter((line) => !/^\s*http-reuse\b/.test(line))
    .map((line) => line.replace(/\s+pool-max-conn\s+\S+/g, ""))
    .join("\n");
}

/** (c): (b) with the previous release's `pool-max-conn 0` on http_defaults' `default-server` line. */
function withPoolMaxConn0(config: string): string {
  const lines = withDefaultReuse(config).split("\n");
  const start = lines.findIndex((l) => /^defaults http_defaults\b/.test(l));
  let at = -1;
  for (let i = start + 1; start >= 0 && i < lines.length && /^\s/.test(lines[i]!); i++)
    if (/^\s+default-server\b/.test(lines[i]!)) at = i;
  if (start < 0) throw new Error("no defaults http_defaults in the rendered config");
  if (at >= 0) lines[at] = `${lines[at]} pool-max-conn 0`;
  else lines.splice(start + 1, 0, "    default-server pool-max-conn 0");
  return lines.join("\n");
}

function timeWaitAt(port: number): number {
  const r = spawnSync("ss", ["-Htan", "state", "time-wait", `( dport = :${port} or sport = :${port} )`], {
    encoding: "utf8",
    maxBuffer: 256 * 2 ** 20,
  });
  if (r.status !== 0) throw new Error(`ss failed: ${r.stderr}`);
  return r.stdout.split("\n").filter((l) => l.trim() !== "").length;
}

async function main(): Promise<void> {
  const haproxyVersion = await requireLoadTools();

  const renderer = new Renderer(loadTemplates());
  const lb = await loopbackOptions();
  const podDir = mkdtempSync(join(tmpdir(), "bench-dataplane-pods-"));
  const used = new Set<number>([lb.options.httpPort, lb.options.statsPort]);
  const loadBefore = loadavg().map((l) => Math.round(l * 100) / 100);
  const runs: Run[] = [];
  let renderedConfig = "";
  let running: RunningHaproxy[] = [];

  /** Pods on a port no run has used, so that the TIME_WAIT sockets counted are this run's. */
  async function startPods(): Promise<{ port: number; socket: string; pods: RunningHaproxy }> {
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      if (used.has(port)) continue;
      used.add(port);
      try {
        const socket = join(podDir, `pods-${port}.sock`);
        return { port, socket, pods: await runHaproxy(podConfig(port, socket), podDir) };
      } catch (err) {
        if (attempt >= 4) throw err;
      }
    }
  }

  try {
    for (let round = 1; round <= rounds; round++) {
      for (let k = 0; k < VARIANTS.length; k++) {
        const variant = VARIANTS[(round - 1 + k) % VARIANTS.length]!.key;
        const { port, socket, pods } = await startPods();
        running = [pods];
        // What `servicelb render` emits for the Service `web` (port 80) with two ready endpoints.
        const snapshot = snapshotFromDocuments([list(web("web", port, PODS))]);
        const rendered = renderSnapshot(snapshot, lb.options, renderer);
        if (rendered.warnings.length > 0 || rendered.skipped.length > 0)
          throw new Error(`render: ${JSON.stringify({ warnings: rendered.warnings, skipped: rendered.skipped })}`);
        renderedConfig = rendered.config;
        const config =
          variant === "rendered"
            ? rendered.config
            : variant === "default reuse"
              ? withDefaultReuse(rendered.config)
              : withPoolMaxConn0(rendered.config);
        const hx = await runHaproxy(config, lb.dir);
        running.push(hx);
        const url = `http://127.0.0.1:${lb.options.httpPort}/web/`;
        await waitFor("the Service served through HAProxy", async () => {
          for (let i = 0; i < 4; i++)
            if ((await httpGet(lb.options.httpPort, "/web/")).status !== 200) return undefined;
          return true;
        });
        const load = load1();
        const connsBefore = await cumConns(socket);
        const result = parseWrk(await wrk(url, { connections, seconds }));
        const timeWait = timeWaitAt(port);
        const podConnections = (await cumConns(socket)) - connsBefore;
        runs.push({ round, variant, ...result, podConnections, timeWait, load });
        await hx.stop();
        await pods.stop();
        running = [];
        if (!process.argv.includes("--json"))
          process.stderr.write(
            `round ${round} ${variant}: ${Math.round(result.reqPerSec)} req/s, ${podConnections} connections to the pods, ${timeWait} TIME_WAIT\n`,
          );
      }
    }
  } finally {
    await Promise.all(running.map((h) => h.stop()));
    lb.cleanup();
    rmSync(podDir, { recursive: true, force: true });
  }
  const loadAfter = loadavg().map((l) => Math.round(l * 100) / 100);

  const of = (v: Variant) => runs.filter((r) => r.variant === v);
  const ratios = Array.from({ length: rounds }, (_, i) => {
    const at = (v: Variant) => runs.find((r) => r.round === i + 1 && r.variant === v)!.reqPerSec;
    return {
      round: i + 1,
      renderedOverDefault: at("rendered") / at("default reuse"),
      previousOverDefault: at("pool-max-conn 0") / at("default reuse"),
    };
  });
  const worst = Math.min(...ratios.map((r) => r.renderedOverDefault));
  const identical = withDefaultReuse(renderedConfig) === renderedConfig;
  const result = {
    machine: machine(),
    haproxy: haproxyVersion,
    load: `wrk -t1 -c${connections} -d${seconds}s, ${rounds} rounds, variants rotated each round`,
    loadAverage: { before: loadBefore, after: loadAfter },
    renderedEqualsDefaultReuse: identical,
    runs: runs.map((r) => ({
      ...r,
      reqPerSec: Math.round(r.reqPerSec),
      latencyMs: Math.round(r.latencyMs * 100) / 100,
    })),
    ratios: ratios.map((r) => ({
      round: r.round,
      renderedOverDefault: Math.round(r.renderedOverDefault * 1000) / 1000,
      previousOverDefault: Math.round(r.previousOverDefault * 1000) / 1000,
    })),
    worstRenderedOverDefault: Math.round(worst * 1000) / 1000,
    goalMet: worst >= 0.95,
  };
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }

  const label = (v: Variant) => VARIANTS.find((x) => x.key === v)!.label;
  const rps = (x: number) => Math.round(x).toLocaleString("en-US");
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  const span = (xs: number[], f: (x: number) => string) => {
    const lo = Math.min(...xs);
    const hi = Math.max(...xs);
    return lo === hi ? f(lo) : `${f(lo)} – ${f(hi)}`;
  };
  console.log(`bench/dataplane — ${result.machine}, HAProxy ${haproxyVersion}`);
  console.log(
    `One HTTP Service, two endpoints (pods: one HAProxy thread answering 200 itself on ${PODS.join(", ")}); ${result.load}`,
  );
  console.log(
    `1/5/15-min load average before ${loadBefore.join(", ")}, after ${loadAfter.join(", ")}; (b) ${
      identical ? "is the same text as (a)" : "differs from (a)"
    }\n`,
  );
  console.log(
    table(
      [
        "round",
        "config",
        "req/s",
        "mean latency",
        "connections to pods",
        "TIME_WAIT at pods' port",
        "errors",
        "load (1 min)",
      ],
      runs.map((r) => [
        r.round,
        label(r.variant),
        rps(r.reqPerSec),
        ms(r.latencyMs),
        rps(r.podConnections),
        r.timeWait,
        r.errors,
        r.load,
      ]),
    ),
  );
  console.log("");
  console.log(
    table(
      ["config", "req/s", "mean latency", "connections to pods", "TIME_WAIT at pods' port"],
      VARIANTS.map(({ key }) => [
        label(key),
        span(
          of(key).map((r) => r.reqPerSec),
          rps,
        ),
        span(
          of(key).map((r) => r.latencyMs),
          ms,
        ),
        span(
          of(key).map((r) => r.podConnections),
          rps,
        ),
        span(
          of(key).map((r) => r.timeWait),
          String,
        ),
      ]),
    ),
  );
  console.log("");
  console.log(
    `(a)/(b) by round: ${ratios.map((r) => r.renderedOverDefault.toFixed(3)).join(", ")}; worst ${worst.toFixed(3)} (goal ≥ 0.95: ${
      result.goalMet ? "met" : "not met"
    })${identical ? "; (a) and (b) are the same text, so their difference is the machine's noise" : ""}`,
  );
  console.log(`(c)/(b) by round: ${ratios.map((r) => r.previousOverDefault.toFixed(3)).join(", ")}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
