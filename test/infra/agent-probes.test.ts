import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { findObject, kustomize, REPO } from "../support/infra-manifests.js";
import { containerOf } from "../support/infra-pods.js";
import { section } from "../support/markdown.js";

// The agent's probes as docs/operations.md states them, against the DaemonSet: liveness must not
// be /healthz, which is 503 on a node with no applied config, since a restart cannot fix that.

const probes = section(readFileSync(join(REPO, "docs", "operations.md"), "utf8"), "probes");
const stated = (kind: string) => new RegExp(`The ${kind} probe is \`GET (/[a-z]+)\``).exec(probes)?.[1];

describe.each(["infra/overlays/knative-s3", "infra/overlays/minio"] as const)("%s: the agent's probes", (dir) => {
  const { container } = containerOf(findObject(kustomize(dir), "DaemonSet", "agent"), "agent");

  it("are the ones docs/operations.md states", () => {
    expect(stated("liveness")).toBe("/status");
    expect(stated("readiness")).toBe("/healthz");
    expect(container.livenessProbe?.httpGet?.path).toBe(stated("liveness"));
    expect(container.readinessProbe?.httpGet?.path).toBe(stated("readiness"));
  });
});
