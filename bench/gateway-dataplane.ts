/*
 * bench/gateway-dataplane: what a Gateway listener's routing costs the data plane (issue 34). A
 * Gateway with one HTTP listener and `--routes` HTTPRoutes on one host, each a PathPrefix
 * `/r<i>` to the Service `web` (two pods that are not the bottleneck, bench/wrk-load.ts), loaded
 * with `wrk -t1 -c<connections> -d<seconds>s` on the path of the route the spec's precedence
 * ranks last (the shortest prefix, then the greatest name: the last of the lines in (d)). Four
 * variants, side by side in one run, their order rotated each round:
 *   (a) the routes as rendered: simple matches, looked up in the listener port's path maps;
 *   (b) (a) and 8 routes that match a path and one header, each on a header name of its own: the
 *       frontend looks each name up in the header maps before the path maps (the request carries
 *       none of them);
 *   (c) (a) and routes under wildcards of 1, 2 and 3 labels, the request's host under the
 *       shortest (`x.w.example`): it passes the exact hosts' lookups and the wildcards' three;
 *   (d) the same routes matching `method: GET` too (every request here is a GET): a method match
 *       keeps a route in ACL lines, evaluated in precedence order, as every route was before the
 *       match maps.
 *   node dist/dev/bench/gateway-dataplane.js [--routes 200] [--rounds 3] [--seconds 8] [--connections 32] [--json]
 */

import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { loadTemplates } from "../shared/adapters/templates.js";
import { snapshotFromDocuments } from "../shared/core/kubernetes/snapshot.js";
import { renderSnapshot } from "../shared/core/render/pipeline.js";
import { Renderer } from "../shared/core/render/render.js";
import { web } from "../test/support/agent.js";
import { list } from "../test/support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../test/support/gateway-fixtures.js";
import { loopbackOptions, runHaproxy, type RunningHaproxy, writePatternFiles } from "../test/support/haproxy.js";
import { freePort, httpRequest, waitFor } from "../test/support/net.js";
import { arg, machine, table } from "./machine.js";
import { cpuBetween, processCpu } from "./process-cpu.js";
import { PODS, load1, parseWrk, podConfig, requireLoadTools, type WrkResult, wrk } from "./wrk-load.js";

const routes = arg("--routes", 200);
const rounds = arg("--rounds", 3);
const seconds = arg("--seconds", 8);
const connections = arg("--connections", 32);
const HOST = "bench.example";
/** (c)'s request host: matched by the shortest wildcard, after the longer ones' lookups. */
const WILDCARD_HOST = "x.w.example";
const HEADER_NAMES = 8;
const WILDCARDS = ["*.w.example", "*.a.w.example", "*.b.a.w.example"];

type Variant = "maps" | "header maps" | "wildcard maps" | "lines";
const VARIANTS: Array<{ key: Variant; label: string }> = [
  { key: "maps", label: `(a) ${routes} routes in the path maps` },
  { key: "header maps", label: `(b) (a) + ${HEADER_NAMES} header names in the header maps` },
  { key: "wildcard maps", label: `(c) (a) + wildcards of ${WILDCARDS.length} label counts` },
  { key: "lines", label: `(d) the ${routes} routes as ACL lines (method: GET)` },
];

interface Run extends WrkResult {
  round: number;
  variant: Variant;
  /** The load balancer's CPU (its master and worker) per request answered, in microseconds. */
  cpuUsPerRequest: number;
  /** Lines of the Gateway listener's frontend in the rendered config. */
  frontendLines: number;
  /** 1-minute load average when the run started. */
  load: number;
}

const to = [{ name: "web", port: 80 }];
const route = (name: string, spec: Record<string, unknown>) =>
  httpRoute(name, { parentRefs: [{ name: "bench" }], ...spec });

function routesOf(variant: Variant): unknown[] {
  const byPath = Array.from({ length: routes }, (_, i) =>
    route(`r${i}`, {
      hostnames: [HOST],
      rules: [
        {
          matches: [
            { path: { type: "PathPrefix", value: `/r${i}` }, ...(variant === "lines" ? { method: "GET" } : {}) },
          ],
          backendRefs: to,
        },
      ],
    }),
  );
  if (variant === "header maps")
    for (let j = 0; j < HEADER_NAMES; j++)
      byPath.push(
        route(`h${j}`, {
          hostnames: [HOST],
          rules: [
            {
              matches: [{ path: { type: "PathPrefix", value: `/h${j}` }, headers: [{ name: `x-h${j}`, value: "v" }] }],
              backendRefs: to,
            },
          ],
        }),
      );
  if (variant === "wildcard maps")
    for (const [j, hostname] of WILDCARDS.entries())
      byPath.push(route(`w${j}`, { hostnames: [hostname], rules: [{ backendRefs: to }] }));
  return byPath;
}

/** The lines of the frontend that binds `port`. */
function frontendLines(config: string, port: number): number {
  const sections = config.split(/\n(?=\S)/);
  const frontend = sections.find((s) => s.startsWith("frontend ") && new RegExp(`\\bbind \\S*:${port}\\b`).test(s));
  if (!frontend) throw new Error(`no frontend binds port ${port}`);
  return frontend.split("\n").filter((l) => l.trim() !== "" && !l.trim().startsWith("#")).length;
}

async function main(): Promise<void> {
  const haproxyVersion = await requireLoadTools();

  const renderer = new Renderer(loadTemplates());
  const lb = await loopbackOptions();
  let listener: number;
  do listener = await freePort();
  while (listener === lb.options.httpPort || listener === lb.options.statsPort);
  const podDir = mkdtempSync(join(tmpdir(), "bench-gateway-dataplane-"));
  const podPort = await freePort();
  const loadBefore = loadavg().map((l) => Math.round(l * 100) / 100);
  const runs: Run[] = [];
  const running: RunningHaproxy[] = [];
  const last = Array.from({ length: routes }, (_, i) => `r${i}`).sort(
    (a, b) => a.length - b.length || (a < b ? 1 : -1),
  )[0]!;
  const path = `/${last}/x`;

  try {
    running.push(await runHaproxy(podConfig(podPort, join(podDir, "pods.sock")), podDir));
    for (let round = 1; round <= rounds; round++) {
      for (let k = 0; k < VARIANTS.length; k++) {
        const variant = VARIANTS[(round - 1 + k) % VARIANTS.length]!.key;
        const items = [
          gatewayClass(),
          gateway("bench", [{ name: "http", port: listener, allowedRoutes: { namespaces: { from: "All" } } }]),
          ...web("web", podPort, PODS),
          ...routesOf(variant),
        ];
        const rendered = renderSnapshot(snapshotFromDocuments([list(items)]), lb.options, renderer);
        if (rendered.warnings.length > 0 || rendered.skipped.length > 0)
          throw new Error(`render: ${JSON.stringify({ warnings: rendered.warnings, skipped: rendered.skipped })}`);
        writePatternFiles(rendered.config, lb.dir);
        const hx = await runHaproxy(rendered.config, lb.dir);
        running.push(hx);
        const host = variant === "wildcard maps" ? WILDCARD_HOST : HOST;
        await waitFor("the route served through HAProxy", async () => {
          for (let i = 0; i < 4; i++)
            if ((await httpRequest(listener, "GET", path, { host })).status !== 200) return undefined;
          return true;
        });
        const load = load1();
        const cpuBefore = processCpu(hx.child.pid);
        const result = parseWrk(
          await wrk(`http://127.0.0.1:${listener}${path}`, { connections, seconds, headers: [`Host: ${host}`] }),
        );
        const cpuMs = cpuBetween(cpuBefore, processCpu(hx.child.pid)).reduce((n, r) => n + r.ms, 0);
        runs.push({
          round,
          variant,
          ...result,
          cpuUsPerRequest: (cpuMs * 1000) / result.requests,
          frontendLines: frontendLines(rendered.config, listener),
          load,
        });
        await hx.stop();
        running.pop();
        if (!process.argv.includes("--json"))
          process.stderr.write(`round ${round} ${variant}: ${Math.round(result.reqPerSec)} req/s\n`);
      }
    }
  } finally {
    await Promise.all(running.map((h) => h.stop()));
    lb.cleanup();
    rmSync(podDir, { recursive: true, force: true });
  }
  const loadAfter = loadavg().map((l) => Math.round(l * 100) / 100);

  const at = (round: number, v: Variant) => runs.find((r) => r.round === round && r.variant === v)!.reqPerSec;
  const ratios = Array.from({ length: rounds }, (_, i) =>
    Object.fromEntries(
      VARIANTS.map(({ key }) => [key, Math.round((at(i + 1, key) / at(i + 1, "maps")) * 1000) / 1000]),
    ),
  ) as Array<Record<Variant, number>>;
  const result = {
    machine: machine(),
    haproxy: haproxyVersion,
    load: `wrk -t1 -c${connections} -d${seconds}s on ${path} (Host: ${HOST}; (c) ${WILDCARD_HOST}), ${rounds} rounds, variants rotated each round`,
    loadAverage: { before: loadBefore, after: loadAfter },
    runs: runs.map((r) => ({
      ...r,
      reqPerSec: Math.round(r.reqPerSec),
      latencyMs: Math.round(r.latencyMs * 100) / 100,
    })),
    overMapsByRound: ratios,
  };
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }

  const label = (v: Variant) => VARIANTS.find((x) => x.key === v)!.label;
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const span = (xs: number[], f: (x: number) => string) => {
    const lo = Math.min(...xs);
    const hi = Math.max(...xs);
    return lo === hi ? f(lo) : `${f(lo)} – ${f(hi)}`;
  };
  const rps = (x: number) => Math.round(x).toLocaleString("en-US");
  console.log(`bench/gateway-dataplane — ${result.machine}, HAProxy ${haproxyVersion}`);
  console.log(`A Gateway listener, ${routes} HTTPRoutes on ${HOST}, pods ${PODS.join(", ")}; ${result.load}`);
  console.log(`1/5/15-min load average before ${loadBefore.join(", ")}, after ${loadAfter.join(", ")}\n`);
  console.log(
    table(
      ["round", "config", "frontend lines", "req/s", "LB CPU µs/request", "mean latency", "errors", "load (1 min)"],
      runs.map((r) => [
        r.round,
        label(r.variant),
        r.frontendLines,
        rps(r.reqPerSec),
        r.cpuUsPerRequest.toFixed(1),
        `${r.latencyMs.toFixed(2)} ms`,
        r.errors,
        r.load,
      ]),
    ),
  );
  console.log("");
  console.log(
    table(
      ["config", "req/s", "÷ (a), by round", "LB CPU µs/request: median (range)"],
      VARIANTS.map(({ key }) => {
        const cpu = runs.filter((r) => r.variant === key).map((r) => r.cpuUsPerRequest);
        return [
          label(key),
          span(
            runs.filter((r) => r.variant === key).map((r) => r.reqPerSec),
            rps,
          ),
          ratios.map((r) => r[key].toFixed(3)).join(", "),
          `${median(cpu).toFixed(1)} (${span(cpu, (x) => x.toFixed(1))})`,
        ];
      }),
    ),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
