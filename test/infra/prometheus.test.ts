import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { renderSnapshot } from "../../shared/core/pipeline.js";
import { Renderer } from "../../shared/core/render.js";
import { parseSnapshot } from "../../shared/core/snapshot.js";
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

    it("scrapes HAProxy's exporter where the published config serves it, and the agent's /metrics", () => {
      const endpoints = Object.fromEntries(monitor.spec.podMetricsEndpoints.map((e) => [e.port, e.path]));
      expect(endpoints).toEqual({ agent: "/metrics", metrics: "/metrics" });
      // HAProxy's exporter leaves out the free slots (in maintenance) and the per-slot series,
      // which would be most of the page.
      expect(monitor.spec.podMetricsEndpoints.find((e) => e.port === "metrics")?.params).toEqual({
        "no-maint": [""],
        scope: ["global", "frontend", "backend"],
      });
      expect(agent.container.ports?.find((p) => p.name === "metrics")?.containerPort).toBe(options.statsPort);
      const { config } = renderSnapshot(
        parseSnapshot(readFileSync(join(REPO, "examples/cluster.yaml"), "utf8")),
        options,
        new Renderer(loadTemplates()),
      );
      const stats = config.slice(config.indexOf("listen stats"));
      expect(stats).toContain(`bind 0.0.0.0:${options.statsPort}\n`);
      expect(stats).toContain("http-request use-service prometheus-exporter if { path /metrics }");
      expect(readFileSync(join(REPO, "shared/agent/http-api.ts"), "utf8")).toContain('case "/metrics":');
    });
  },
);
