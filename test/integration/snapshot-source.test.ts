import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readLiveSnapshot } from "../../shared/adapters/snapshot-source.js";
import { ParsedItems } from "../../shared/core/kubernetes/snapshot.js";
import { KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";

/** Every namespace, every label. */
const ALL = { namespace: undefined, selector: undefined };

// The live snapshot through the real @kubernetes/client-node against the API emulator.

function service(name: string, port = 80): KubeObject {
  return {
    metadata: { name, namespace: "default" },
    spec: { type: "ClusterIP", clusterIP: "10.0.0.10", ports: [{ name: "http", port, protocol: "TCP" }] },
  };
}

function slice(name: string, ip: string): KubeObject {
  return {
    metadata: { name: `${name}-x`, namespace: "default", labels: { "kubernetes.io/service-name": name } },
    addressType: "IPv4",
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
  };
}

describe("readLiveSnapshot", () => {
  let server: KubeApiEmulator;
  let kubeconfig: string;

  beforeEach(async () => {
    server = await new KubeApiEmulator().start();
    kubeconfig = await server.writeKubeconfig();
    for (const name of ["a", "b", "c", "d", "e"]) {
      server.upsert("Service", service(name));
      server.upsert("EndpointSlice", slice(name, "10.1.0.1"));
    }
  });

  afterEach(async () => {
    await server.stop();
  });

  it("reports a malformed object and keeps the others", async () => {
    const bad = server.upsert("Service", service("bad", 99999));
    const snap = await readLiveSnapshot(ALL, { kubeconfig });
    expect(snap.services.map((s) => s.metadata.name)).toEqual(["a", "b", "c", "d", "e"]);
    expect(snap.problems).toHaveLength(1);
    expect(snap.problems[0]).toMatch(/^live list \(Service default\/bad\): spec\.ports\.0\.port: /);
    // The newest write is the malformed one: the revision is still the list's.
    expect(snap.revision).toBe(bad.metadata.resourceVersion);
    expect(snap.trustedRevisions).toBe(true);
  });

  it("reuses unchanged objects across lists, also when a list restarts after an expired continue token", async () => {
    const reuse = new ParsedItems();
    const first = await readLiveSnapshot(ALL, { kubeconfig }, reuse);
    server.upsert("EndpointSlice", slice("c", "10.1.0.9"));
    let expired = false;
    server.onRequest((req) => {
      if (req.path === "/api/v1/services" && req.query.continue && !expired) {
        expired = true;
        server.expireContinueTokens();
      }
    });
    // Pages of two: the Service list restarts once, and must still hold every Service once.
    const second = await readLiveSnapshot(ALL, { kubeconfig, pageSize: 2 }, reuse);
    expect(expired).toBe(true);
    expect(second.services.map((s) => s.metadata.name)).toEqual(["a", "b", "c", "d", "e"]);
    for (const [i, s] of second.services.entries()) expect(s).toBe(first.services[i]);
    const changed = second.endpointSlices.find((s) => s.metadata.name === "c-x")!;
    expect(changed).not.toBe(first.endpointSlices.find((s) => s.metadata.name === "c-x"));
    expect(changed.readyAddresses).toEqual(["10.1.0.9"]);
  });
});
