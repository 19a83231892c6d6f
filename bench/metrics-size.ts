/*
 * bench/metrics-size: the size of one node's /metrics pages at N Services (issue 35 §3), HAProxy's
 * exporter with the options it takes, the same through the agent's /metrics/haproxy with the
 * PodMonitor's families (infra/components/prometheus/podmonitor.yaml), and the agent's own page
 * (its info series grow with the Services and their endpoints). N Services × E endpoints of the
 * synthetic cluster (bench/synthetic.ts) rendered by the real renderer, written as the agent
 * writes them, served by a real `haproxy -W`; /metrics/haproxy by the agent's real handler; the
 * agent's page from its real metrics registry on the same config. Every page is fetched once per
 * variant: sizes do not vary between runs, only with the config; the seconds of one fetch do.
 *   node dist/dev/bench/metrics-size.js [--sizes 1000] [--endpoints 10] [--json]
 */

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, get } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { haproxyAvailable } from "../shared/adapters/haproxy/check.js";
import { loadTemplates, packageRoot } from "../shared/adapters/templates.js";
import { parse } from "yaml";
import { createLogger } from "../shared/adapters/log.js";
import { haproxyMetricsHandler } from "../shared/agent/haproxy-metrics.js";
import { createAgentMetrics } from "../shared/agent/metrics.js";
import { parseRenderOptions } from "../shared/core/settings/options.js";
import { renderSnapshot } from "../shared/core/render/pipeline.js";
import { Renderer } from "../shared/core/render/render.js";
import { snapshotFromDocuments } from "../shared/core/kubernetes/snapshot.js";
import { freePort, waitFor } from "../test/support/net.js";
import { writeNodeFiles } from "./node-files.js";
import { arg, machine, mib, table } from "./machine.js";
import { syntheticCluster } from "./synthetic.js";

const argValue = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const sizes = argValue("--sizes", "1000").split(",").map(Number);
const endpoints = arg("--endpoints", 10);
/** The issue's bound for a node's pages together. */
const TARGET_MIB = 5;

/** HAProxy's exporter queries: what the PodMonitor may put in `params`. */
const EXPORTER_VARIANTS = [
  { key: "all", query: "" },
  { key: "no-maint", query: "?no-maint=" },
  { key: "no-maint, no server scope", query: "?no-maint=&scope=global&scope=frontend&scope=backend" },
] as const;

/** The query the PodMonitor sends the agent's /metrics/haproxy. */
function podMonitorQuery(): string {
  const monitor = parse(readFileSync(join(packageRoot(), "infra/components/prometheus/podmonitor.yaml"), "utf8")) as {
    spec: { podMetricsEndpoints: Array<{ path: string; params?: { family?: string[] } }> };
  };
  const families = monitor.spec.podMetricsEndpoints.find((e) => e.path === "/metrics/haproxy")!.params!.family!;
  return `?${families.map((f) => `family=${f}`).join("&")}`;
}

interface Page {
  services: number;
  page: string;
  bytes: number;
  /** On the wire when the scraper asks for gzip, as Prometheus does. */
  gzipBytes: number;
  samples: number;
  /** One plain fetch, from the request to the last byte. */
  seconds: number;
}

/**
 * A page's bytes as sent (gzip: compressed, as fetch would never show them) and, uncompressed, its
 * samples, counted as it streams: at 10,000 Services a page is longer than a string can be.
 */
function measure(url: string, gzip: boolean): Promise<{ bytes: number; samples: number; seconds: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    get(url, { headers: gzip ? { "accept-encoding": "gzip" } : {} }, (res) => {
      if (gzip && res.headers["content-encoding"] !== "gzip") reject(new Error(`${url} was not compressed`));
      let bytes = 0;
      let samples = 0;
      // A sample line is one that starts with neither "#" nor a newline (the page ends with one).
      let atLineStart = true;
      res.on("data", (c: Buffer) => {
        bytes += c.length;
        if (gzip) return;
        for (const byte of c) {
          if (atLineStart && byte !== 0x23 && byte !== 0x0a) samples++;
          atLineStart = byte === 0x0a;
        }
      });
      if (res.statusCode !== 200) reject(new Error(`${url} answered ${res.statusCode}`));
      res.on("end", () => resolve({ bytes, samples, seconds: (performance.now() - started) / 1000 }));
      res.on("error", reject);
    }).on("error", reject);
  });
}

const samplesOf = (text: string) => text.split("\n").filter((l) => l !== "" && !l.startsWith("#")).length;

async function exporterPages(cfg: string, dir: string, statsPort: number, services: number): Promise<Page[]> {
  const child = spawn("haproxy", ["-W", "-f", cfg], { cwd: dir, stdio: "ignore" });
  try {
    const url = `http://127.0.0.1:${statsPort}/metrics`;
    await waitFor(
      "HAProxy's exporter",
      () =>
        fetch(url).then(
          (r) => (r.ok ? true : undefined),
          () => undefined,
        ),
      120_000,
    );
    const pages: Page[] = [];
    for (const v of EXPORTER_VARIANTS) {
      const page = await measure(`${url}${v.query}`, false);
      const gzipped = await measure(`${url}${v.query}`, true);
      pages.push({ services, page: `HAProxy ${v.key}`, ...page, gzipBytes: gzipped.bytes });
    }
    pages.push(await filteredPage(statsPort, services));
    return pages;
  } finally {
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
}

/** The agent's GET /metrics/haproxy (its real handler) in front of this HAProxy, with the PodMonitor's query. */
async function filteredPage(statsPort: number, services: number): Promise<Page> {
  const handler = haproxyMetricsHandler({
    exporter: () => ({ host: "127.0.0.1", port: statsPort, path: "/metrics" }),
    log: createLogger("bench", "silent"),
  });
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://agent");
    handler(req, res, url.searchParams).catch((err: Error) => res.writeHead(500).end(err.message));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics/haproxy${podMonitorQuery()}`;
    const page = await measure(url, false);
    const gzipped = await measure(url, true);
    return { services, page: "agent /metrics/haproxy, PodMonitor's families", ...page, gzipBytes: gzipped.bytes };
  } finally {
    server.close();
  }
}

async function agentPage(config: string, services: number): Promise<Page> {
  const metrics = createAgentMetrics();
  metrics.probeRunning(() => ({ text: config, key: "bench", sha256: "0".repeat(64) }));
  const started = performance.now();
  const text = await metrics.registry.metrics();
  const seconds = (performance.now() - started) / 1000;
  // As the agent's GET /metrics compresses it (agent/http-api.ts).
  const gzipBytes = gzipSync(text, { level: 1 }).length;
  return { services, page: "agent", bytes: Buffer.byteLength(text), gzipBytes, samples: samplesOf(text), seconds };
}

async function main(): Promise<void> {
  const version = await haproxyAvailable();
  if (!version) throw new Error("haproxy is not installed: apt-get install -y haproxy");
  const renderer = new Renderer(loadTemplates());
  const root = mkdtempSync(join(tmpdir(), "bench-metrics-size-"));
  const pages: Page[] = [];
  try {
    for (const services of sizes) {
      const dir = join(root, String(services));
      const statsPort = await freePort();
      const options = parseRenderOptions({
        bindAddress: "127.0.0.1",
        httpPort: await freePort(),
        statsPort,
        statsSocket: join(dir, "admin.sock"),
        serverStateFile: join(dir, "server-state"),
      });
      const { config } = renderSnapshot(
        snapshotFromDocuments([syntheticCluster(services, endpoints)]),
        options,
        renderer,
      );
      pages.push(...(await exporterPages(writeNodeFiles(config, dir), dir, statsPort, services)));
      pages.push(await agentPage(config, services));
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  report(pages, version);
}

function report(pages: Page[], version: string): void {
  const header = { machine: machine(), haproxy: version, cluster: `synthetic, ${endpoints} endpoints per Service` };
  // What a node serves a scrape with each exporter variant: that page and the agent's, as pages
  // and on the wire.
  const within = (bytes: number) => (bytes <= TARGET_MIB * 2 ** 20 ? "yes" : "no");
  const totals = pages
    .filter((p) => p.page !== "agent")
    .map((p) => {
      const agent = pages.find((a) => a.services === p.services && a.page === "agent")!;
      const bytes = p.bytes + agent.bytes;
      const wire = p.gzipBytes + agent.gzipBytes;
      return {
        services: p.services,
        scrape: `${p.page} + agent`,
        mib: mib(bytes),
        wireMiB: mib(wire),
        pageWithinTarget: within(bytes),
        wireWithinTarget: within(wire),
      };
    });
  if (process.argv.includes("--json")) {
    console.log(JSON.stringify({ ...header, targetMiB: TARGET_MIB, pages, totals }, null, 2));
    return;
  }
  console.log(`\n${Object.values(header).join(" · ")}\n`);
  console.log(
    table(
      ["Services", "page", "MiB", "gzip MiB", "samples", "fetch s"],
      pages.map((p) => [
        p.services.toLocaleString("en-US"),
        p.page,
        mib(p.bytes),
        mib(p.gzipBytes),
        p.samples.toLocaleString("en-US"),
        p.seconds.toFixed(2),
      ]),
    ),
  );
  console.log(`\nA node's scrape, against the target of ${TARGET_MIB} MiB:\n`);
  console.log(
    table(
      ["Services", "scrape", "pages MiB", `≤ ${TARGET_MIB}`, "on the wire MiB", `≤ ${TARGET_MIB}`],
      totals.map((t) => [
        t.services.toLocaleString("en-US"),
        t.scrape,
        t.mib,
        t.pageWithinTarget,
        t.wireMiB,
        t.wireWithinTarget,
      ]),
    ),
  );
}

await main();
