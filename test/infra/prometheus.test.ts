import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { parseFamilies } from "../../shared/agent/haproxy-metrics.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { exporterOf } from "../../shared/core/haproxy-config/exporter.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import { parseSnapshot } from "../../shared/core/kubernetes/snapshot.js";
import { findObject, REPO, type K8sObject } from "../support/infra-manifests.js";
import { containerOf, PodView } from "../support/infra-pods.js";

// infra/components/prometheus added to each overlay, as its kustomization.yaml tells the operator.

/** The fields of the Prometheus Operator's PodMonitor (monitoring.coreos.com/v1) used here; strict, so that a typo fails. */
const podMonitor = z.strictObject({
  apiVersion: z.literal("monitoring.coreos.com/v1"),
  kind: z.literal("PodMonitor"),
  metadata: z.object({ name: z.string(), namespace: z.string(), labels: z.record(z.string(), z.string()).optional() }),
  spec: z.strictObject({
    selector: z.strictObject({ matchLabels: z.record(z.string(), z.string()) }),
    podMetricsEndpoints: z
      .array(
        z.strictObject({
          port: z.string(),
          path: z.string(),
          interval: z.string().optional(),
          params: z.record(z.string(), z.array(z.string())).optional(),
          relabelings: z.array(z.strictObject({ targetLabel: z.string(), replacement: z.string() })).optional(),
        }),
      )
      .min(1),
  }),
});

function withComponent(overlay: string): K8sObject[] {
  const dir = mkdtempSync(join(tmpdir(), "servicelb-prometheus-"));
  // kustomize takes relative paths only.
  const rel = (p: string) => relative(dir, join(REPO, p));
  writeFileSync(
    join(dir, "kustomization.yaml"),
    `resources:\n  - ${rel(overlay)}\ncomponents:\n  - ${rel("infra/components/prometheus")}\n`,
  );
  const yaml = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return parseAllDocuments(yaml).map((d) => d.toJS() as K8sObject);
}

describe.each(["infra/overlays/knative-s3", "infra/overlays/minio"])(
  "%s with infra/components/prometheus",
  (overlay) => {
    const objects = withComponent(overlay);
    const agentSet = findObject(objects, "DaemonSet", "agent");
    const agent = containerOf(agentSet, "agent");
    const monitor = podMonitor.parse(findObject(objects, "PodMonitor", "agent"));
    const reconcile = containerOf(findObject(objects, "Service", "reconcile", "serving.knative.dev"), "reconcile");
    const root = mkdtempSync(join(tmpdir(), "servicelb-prometheus-env-"));
    const secrets = { store: { url: "s3://servicelb-configs/prod" }, "notify-token": { token: "example-token" } };
    const options = loadFunctionSettings(
      new PodView(objects, secrets).env(reconcile.pod, reconcile.container, {}, root),
    ).options;

    it("ships the alerts and the Grafana dashboard", () => {
      expect(findObject(objects, "PrometheusRule", "servicelb")).toBeDefined();
      const dashboard = findObject(objects, "ConfigMap", "servicelb-dashboard") as unknown as {
        metadata: { labels: Record<string, string> };
        data: Record<string, string>;
      };
      expect(dashboard.metadata.labels.grafana_dashboard).toBe("1");
      expect(JSON.parse(dashboard.data["dashboard.json"]!).uid).toBe("servicelb");
    });

    it("scrapes every agent pod, on ports the agent container declares, never on the node", () => {
      const labels = (agentSet as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } })
        .spec.template.metadata.labels;
      expect(monitor.metadata.namespace).toBe("servicelb");
      expect(labels).toMatchObject(monitor.spec.selector.matchLabels);
      for (const e of monitor.spec.podMetricsEndpoints) {
        const port = agent.container.ports?.find((p) => p.name === e.port);
        expect(port, e.port).toBeDefined();
        expect(port?.hostPort, e.port).toBeUndefined();
      }
    });

    it("scrapes the agent's /metrics and HAProxy's exporter through the agent, where the published config serves it", () => {
      expect(monitor.spec.podMetricsEndpoints.map((e) => [e.port, e.path])).toEqual([
        ["agent", "/metrics"],
        ["agent", "/metrics/haproxy"],
      ]);
      const http = readFileSync(join(REPO, "shared/agent/http-api.ts"), "utf8");
      expect(http).toContain('case "/metrics":');
      expect(http).toContain('case "/metrics/haproxy":');
      // One port, two targets: their series (up, scrape_*) are told apart by the endpoint label.
      expect(monitor.spec.podMetricsEndpoints[0]!.relabelings).toBeUndefined();
      expect(monitor.spec.podMetricsEndpoints[1]!.relabelings).toEqual([
        { targetLabel: "endpoint", replacement: "haproxy" },
      ]);
      const params = monitor.spec.podMetricsEndpoints[1]!.params!;
      expect(Object.keys(params)).toEqual(["family"]);
      expect(parseFamilies(new URLSearchParams(params.family!.map((f) => ["family", f])))).toEqual({
        families: new Set(params.family),
      });
      // Every HAProxy family the dashboard reads is kept (test/integration/dashboard-queries.test.ts
      // runs its queries against a real Prometheus).
      const dashboard = readFileSync(join(REPO, "infra/components/prometheus/dashboard.json"), "utf8");
      for (const family of new Set(dashboard.match(/haproxy_[a-z0-9_]+/g))) expect(params.family).toContain(family);
      // The stats page stays on loopback; the agent finds its exporter in the config it runs.
      expect(agent.container.ports?.map((p) => p.name)).not.toContain("metrics");
      const { config } = renderSnapshot(
        parseSnapshot(readFileSync(join(REPO, "examples/cluster.yaml"), "utf8")),
        options,
        new Renderer(loadTemplates()),
      );
      expect(config.slice(config.indexOf("listen stats"))).toContain(`bind 127.0.0.1:${options.statsPort}\n`);
      expect(exporterOf(config, {})).toEqual({ host: "127.0.0.1", port: options.statsPort, path: "/metrics" });
    });
  },
);
