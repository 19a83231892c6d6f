import { afterEach, describe, expect, it } from "vitest";
import type { ClusterError } from "../../shared/adapters/cluster-error.js";
import { loadKubeConfig } from "../../shared/adapters/kube-config.js";
import { type ClusterEvent, watchCluster } from "../../shared/dev/cluster-watch.js";
import type { RequestInfo } from "../../shared/dev/kube-api-emulator.js";
import { TestKubeApi } from "../support/kube-api.js";
import { endpoints, service, slice } from "../support/cluster-objects.js";

// Through the real @kubernetes/client-node Watch against the protocol fake.

/**
 * Polls until `condition` holds. No deadline of its own: every condition awaited here follows from
 * what the test did, so a busy machine makes it later, not false; vitest's testTimeout ends a test
 * whose event never comes.
 */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 10));
}

describe("watchCluster", () => {
  let server: TestKubeApi;
  let stop: (() => void) | undefined;

  afterEach(async () => {
    stop?.();
    stop = undefined;
    await server.stop();
  });

  const summary = (events: ClusterEvent[]) =>
    events.map(
      (e) =>
        `${e.type} ${e.object.apiVersion} ${e.object.kind} ${e.object.metadata.namespace}/${e.object.metadata.name}`,
    );

  it("delivers ADDED, MODIFIED and DELETED for Services and EndpointSlices", async () => {
    server = await new TestKubeApi().start();
    server.upsert("Service", service("default", "existing"));
    const events: ClusterEvent[] = [];
    const errors: ClusterError[] = [];
    stop = watchCluster(loadKubeConfig({ kubeconfig: await server.writeKubeconfig() }), {
      onEvent: (e) => events.push(e),
      onError: (e) => errors.push(e),
    });
    // A watch without resourceVersion starts with the current state.
    await until(() => events.length === 1 && server.requests.filter((r) => r.query.watch === "true").length === 2);

    server.upsert("Service", service("default", "web"));
    server.upsert("Service", { ...service("default", "web"), spec: { type: "ClusterIP", ports: [{ port: 81 }] } });
    server.upsert("EndpointSlice", slice("default", "web", "10.1.0.1"));
    server.remove("Service", "default", "web");
    server.remove("EndpointSlice", "default", "web-abcde");
    await until(() => events.length === 6);

    // Two streams: order holds within each resource, not across them.
    const services = events.filter((e) => e.object.kind === "Service");
    expect(summary(services)).toEqual([
      "ADDED v1 Service default/existing",
      "ADDED v1 Service default/web",
      "MODIFIED v1 Service default/web",
      "DELETED v1 Service default/web",
    ]);
    expect(summary(events.filter((e) => e.object.kind === "EndpointSlice"))).toEqual([
      "ADDED discovery.k8s.io/v1 EndpointSlice default/web-abcde",
      "DELETED discovery.k8s.io/v1 EndpointSlice default/web-abcde",
    ]);
    expect(services[2]!.object.spec).toEqual({ type: "ClusterIP", ports: [{ port: 81 }] });
    expect(services[3]!.object.metadata.resourceVersion).toBe("6"); // the deletion's revision
    expect(errors).toEqual([]);
  });

  it("resumes from the last resourceVersion when the server ends the stream", async () => {
    server = await new TestKubeApi().start();
    const events: ClusterEvent[] = [];
    stop = watchCluster(loadKubeConfig({ kubeconfig: await server.writeKubeconfig() }), {
      namespace: "shop",
      onEvent: (e) => events.push(e),
      onError: () => {},
    });
    await until(() => server.requests.filter((r) => r.query.watch === "true").length === 2);
    server.upsert("Service", service("shop", "cart"));
    server.upsert("Service", service("default", "elsewhere"));
    await until(() => events.length === 1);
    server.endWatches();

    const servicesWatch = (r: RequestInfo) => r.path === "/api/v1/namespaces/shop/services" && r.query.watch === "true";
    await until(() => server.requests.filter(servicesWatch).length === 2);
    server.upsert("Service", service("shop", "checkout"));
    await until(() => events.length === 2);

    expect(summary(events)).toEqual(["ADDED v1 Service shop/cart", "ADDED v1 Service shop/checkout"]);
    expect(server.requests.filter(servicesWatch).map((r) => r.query.resourceVersion)).toEqual([undefined, "2"]);
  });

  it("starts over from the current state when its resourceVersion was compacted away", async () => {
    server = await new TestKubeApi().start();
    const events: ClusterEvent[] = [];
    const errors: ClusterError[] = [];
    stop = watchCluster(loadKubeConfig({ kubeconfig: await server.writeKubeconfig() }), {
      namespace: "shop",
      onEvent: (e) => events.push(e),
      onError: (e) => errors.push(e),
    });
    const servicesWatch = (r: RequestInfo) => r.path === "/api/v1/namespaces/shop/services" && r.query.watch === "true";
    await until(() => server.requests.filter(servicesWatch).length === 1);
    server.upsert("Service", service("shop", "cart")); // revision 2, the last this watch sees
    await until(() => events.length === 1);
    // Writes the namespaced watch never sees, compaction past its revision, then the end of the
    // stream: resuming at 2 answers 410.
    server.upsert("Service", service("default", "a"));
    server.upsert("Service", service("default", "b"));
    server.compact();
    server.endWatches();

    await until(() => events.length === 2);

    expect(summary(events)).toEqual(["ADDED v1 Service shop/cart", "ADDED v1 Service shop/cart"]);
    expect(server.requests.filter(servicesWatch).map((r) => r.query.resourceVersion)).toEqual([
      undefined,
      "2",
      undefined,
    ]);
    expect(errors).toEqual([]);
  });

  it("watches v1 Endpoints when the EndpointSlice API is missing", async () => {
    server = await new TestKubeApi({ endpointSlices: false }).start();
    const events: ClusterEvent[] = [];
    const errors: ClusterError[] = [];
    stop = watchCluster(loadKubeConfig({ kubeconfig: await server.writeKubeconfig() }), {
      onEvent: (e) => events.push(e),
      onError: (e) => errors.push(e),
    });
    await until(() => server.requests.some((r) => r.path === "/api/v1/endpoints" && r.status === 200));
    server.upsert("Endpoints", endpoints("default", "web", "10.1.0.1"));
    await until(() => events.length === 1);

    expect(summary(events)).toEqual(["ADDED v1 Endpoints default/web"]);
    expect(errors).toEqual([]);
  });

  it("reports a forbidden watch with the RBAC verb to grant", async () => {
    server = await new TestKubeApi().start();
    server.forbid("services", ["watch"]);
    const errors: ClusterError[] = [];
    stop = watchCluster(loadKubeConfig({ kubeconfig: await server.writeKubeconfig() }), {
      onEvent: () => {},
      onError: (e) => errors.push(e),
    });
    await until(() => errors.length >= 1);

    expect(errors[0]!.kind).toBe("forbidden");
    expect(errors[0]!.message).toContain('RBAC: grant "watch" on "services" (group "") cluster-wide');
  });
});
