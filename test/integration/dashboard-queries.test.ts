import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { z } from "zod";
import { A, agentWorld, B } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { REPO } from "../support/infra-manifests.js";
import { freePort, waitFor } from "../support/net.js";
import { makePki } from "../support/tls.js";

// Every query of infra/components/prometheus/dashboard.json, evaluated by a real Prometheus
// (Debian's prometheus package) scraping a real agent and its HAProxy as the PodMonitor does
// (pod and namespace target labels, HAProxy's exporter through the agent's /metrics/haproxy with the
// PodMonitor's families): each returns series, and
// each series has the labels its panel shows. One Service lives in a spare, so the per-Service
// panels are seen joining through a spare.

const world = agentWorld();

const target = z.object({ expr: z.string(), legendFormat: z.string().optional() });
const dashboard = z.object({
  panels: z.array(z.object({ title: z.string(), type: z.string(), targets: z.array(target).optional() })),
  templating: z.object({
    list: z.array(z.object({ name: z.string(), query: z.union([z.string(), z.object({ query: z.string() })]) })),
  }),
});
const board = dashboard.parse(
  JSON.parse(readFileSync(join(REPO, "infra/components/prometheus/dashboard.json"), "utf8")),
);

/** The PodMonitor's endpoints: each path of the agent with its query. */
const endpoints = z
  .object({
    spec: z.object({
      podMetricsEndpoints: z.array(
        z.object({
          port: z.literal("agent"),
          path: z.string(),
          params: z.record(z.string(), z.array(z.string())).optional(),
          relabelings: z.array(z.object({ targetLabel: z.string(), replacement: z.string() })).optional(),
        }),
      ),
    }),
  })
  .parse(parse(readFileSync(join(REPO, "infra/components/prometheus/podmonitor.yaml"), "utf8")))
  .spec.podMetricsEndpoints;

/** What Grafana would substitute: every namespace and Service, a rate window of several scrapes. */
const substitute = (expr: string) =>
  expr.replaceAll("$__rate_interval", "10s").replaceAll("$namespace", ".*").replaceAll("$service", ".*");

interface Series {
  metric: Record<string, string>;
}

function svc(name: string, pods: string[], namespace = "default"): unknown[] {
  return [
    service(name, [{ port: 80, targetPort: world.pods.port }], { namespace }),
    slice(name, [{ port: world.pods.port }], pods, { namespace }),
  ];
}

describe("the Grafana dashboard's queries against a real Prometheus", () => {
  let prometheus: ChildProcess | undefined;
  let dataDir: string | undefined;
  afterAll(() => {
    prometheus?.kill("SIGKILL");
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("each panel's query returns series with the labels the panel shows", { timeout: 60_000 }, async () => {
    if (spawnSync("prometheus", ["--version"]).error)
      throw new Error("prometheus is not installed: run `apt-get install -y prometheus` (Debian's 2.42)");
    dataDir = mkdtempSync(join(tmpdir(), "servicelb-prometheus-"));
    // HTTPS too, for the certificates panel.
    const pki = makePki(dataDir);
    const n = await world.node({ spareBackends: 2, sslCert: pki.serverPem, httpsPort: await freePort() });
    const web = svc("web", [A]);
    await n.publish(web, 100);
    const agent = await world.start(n);
    // shop/api goes into spare_1 through the runtime API.
    const published = await n.publish([...web, ...svc("api", [B], "shop")], 110);
    await n.notify(agent, published);
    await world.appliedKey(agent, published.key);
    expect(agent.status().applied?.how).toBe("runtime");

    const port = await freePort();
    const labels = { pod: "agent-a", namespace: "servicelb" };
    const config = {
      global: { scrape_interval: "1s" },
      // One job, as the operator's job label makes it: the endpoint label (the operator's port name,
      // or the PodMonitor's relabeling) keeps the two targets apart.
      scrape_configs: endpoints.map((e) => ({
        job_name: e.path,
        metrics_path: e.path,
        params: e.params,
        static_configs: [
          { targets: [new URL(agent.url).host], labels: { ...labels, job: "servicelb/agent", endpoint: e.port } },
        ],
        relabel_configs: (e.relabelings ?? []).map((r) => ({
          target_label: r.targetLabel,
          replacement: r.replacement,
        })),
      })),
    };
    writeFileSync(join(dataDir, "prometheus.yml"), JSON.stringify(config));
    prometheus = spawn(
      "prometheus",
      [
        `--config.file=${join(dataDir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dataDir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: "ignore" },
    );
    const api = `http://127.0.0.1:${port}/api/v1`;
    const query = async (expr: string): Promise<Series[]> => {
      const r = await fetch(`${api}/query?query=${encodeURIComponent(expr)}`);
      const body = (await r.json()) as { status: string; error?: string; data: { result: Series[] } };
      if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
      return body.data.result;
    };

    // Traffic to both Services while Prometheus scrapes; rates need a few scrapes in their window.
    await waitFor("both targets up", async () => {
      const up = await query("up == 1").catch(() => []);
      return up.length === endpoints.length ? true : undefined;
    });
    const until = Date.now() + 5000;
    while (Date.now() < until) {
      await n.get("/web/x");
      await n.get("/shop/api/x");
      await n.get("/nowhere");
    }

    for (const panel of board.panels) {
      for (const t of panel.targets ?? []) {
        const result = await query(substitute(t.expr));
        expect(result.length, `${panel.title}: ${t.expr}`).toBeGreaterThan(0);
        const shown = [...(t.legendFormat ?? "").matchAll(/\{\{(\w+)\}\}/g)].map((m) => m[1]!);
        for (const s of result)
          for (const label of shown) expect(s.metric, `${panel.title}: ${label}`).toHaveProperty(label);
      }
    }
    // The spare's traffic is shop/api's.
    const requests = board.panels.find((p) => p.title === "Requests")!.targets![0]!.expr;
    const services = (await query(substitute(requests))).map(
      (s) => `${s.metric.service_namespace}/${s.metric.service_name}`,
    );
    expect(services.sort()).toEqual(["default/web", "shop/api"]);

    for (const v of board.templating.list) {
      if (typeof v.query === "string") continue; // the data source picker
      const m = /^label_values\((.+), (\w+)\)$/.exec(v.query.query);
      expect(m, v.name).not.toBeNull();
      const r = await fetch(`${api}/label/${m![2]}/values?match[]=${encodeURIComponent(substitute(m![1]!))}`);
      expect(((await r.json()) as { data: string[] }).data.length, v.name).toBeGreaterThan(0);
    }
  });
});
