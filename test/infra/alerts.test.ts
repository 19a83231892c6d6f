import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { z } from "zod";
import { createAgentMetrics } from "../../shared/agent/metrics.js";
import { REPO } from "../support/infra-manifests.js";

// The PrometheusRule of infra/components/prometheus, through Debian's promtool (the prometheus
// package, installed by .ci/run): it parses, and every alert fires on the input series it is for
// and stays silent where it should (alerts.promtool.yaml).

const rule = z.strictObject({
  alert: z.string().regex(/^Servicelb[A-Za-z]+$/),
  expr: z.string(),
  for: z.string().optional(),
  labels: z.strictObject({ severity: z.enum(["critical", "warning", "info"]) }),
  annotations: z.strictObject({ summary: z.string().min(1), runbook: z.string().min(40) }),
});
const prometheusRule = z.strictObject({
  apiVersion: z.literal("monitoring.coreos.com/v1"),
  kind: z.literal("PrometheusRule"),
  metadata: z.object({ name: z.string(), namespace: z.literal("servicelb"), labels: z.record(z.string(), z.string()) }),
  spec: z.strictObject({ groups: z.array(z.strictObject({ name: z.string(), rules: z.array(rule).min(1) })).min(1) }),
});
const promtoolTests = z.object({
  tests: z.array(
    z.object({
      alert_rule_test: z.array(z.object({ alertname: z.string(), exp_alerts: z.array(z.unknown()) })),
    }),
  ),
});

const TESTS = join(REPO, "test/infra/alerts.promtool.yaml");
const spec = prometheusRule.parse(parse(readFileSync(join(REPO, "infra/components/prometheus/alerts.yaml"), "utf8")));
const alerts = spec.spec.groups.flatMap((g) => g.rules);

function promtool(...args: string[]) {
  const r = spawnSync("promtool", args, { encoding: "utf8" });
  if (r.error) throw new Error("promtool is not installed: run `apt-get install -y prometheus` (Debian's 2.42)");
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe("infra/components/prometheus/alerts.yaml", () => {
  let dir: string;
  beforeAll(() => {
    // promtool reads plain rule files: the PrometheusRule's groups, beside the tests that name them.
    dir = mkdtempSync(join(tmpdir(), "servicelb-alerts-"));
    writeFileSync(join(dir, "rules.yaml"), stringify({ groups: spec.spec.groups }));
    copyFileSync(TESTS, join(dir, "alerts.promtool.yaml"));
  });

  it("passes promtool check rules", () => {
    const r = promtool("check", "rules", join(dir, "rules.yaml"));
    expect(r.out).toContain(`SUCCESS: ${alerts.length} rules found`);
    expect(r.status).toBe(0);
  });

  it("passes promtool test rules: each alert fires on its input series and is silent where it should be", () => {
    const r = promtool("test", "rules", join(dir, "alerts.promtool.yaml"));
    expect(r.out).toContain("SUCCESS");
    expect(r.status).toBe(0);
  });

  it("has, for every alert, a case where it fires and one where it stays silent", () => {
    const cases = promtoolTests.parse(parse(readFileSync(TESTS, "utf8"))).tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} fires`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} stays silent`,
      ).toBe(true);
    }
  });

  it("uses only series the agent exports", async () => {
    const exported = new Set((await createAgentMetrics().registry.getMetricsAsJSON()).map((m) => m.name));
    for (const { alert, expr } of alerts)
      for (const name of expr.match(/\bservicelb_\w+/g) ?? []) expect(exported, `${alert}: ${name}`).toContain(name);
  });

  it("is documented in docs/operations.md, every alert", () => {
    const doc = readFileSync(join(REPO, "docs/operations.md"), "utf8");
    for (const { alert } of alerts) expect(doc, alert).toContain(`\`${alert}\``);
  });
});
