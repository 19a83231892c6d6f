/*
 * The Gateway API kinds through the real client-node and the Kubernetes API emulator: listed
 * beside Services when the cluster serves them, none (and no error) when it does not, and the
 * emulator's status subresource and generation, which status writes and observedGeneration rely on.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { listCluster } from "../../shared/adapters/cluster.js";
import { loadKubeConfig } from "../../shared/adapters/kube-config.js";
import { readLiveSnapshot } from "../../shared/adapters/snapshot-source.js";
import { resolveGateway } from "../../shared/core/gateway/resolve.js";
import { service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute, referenceGrant } from "../support/gateway-fixtures.js";
import { TestKubeApi } from "../support/kube-api.js";

describe("Gateway API objects from the cluster", () => {
  let server: TestKubeApi;
  let kubeconfig: string;

  beforeEach(async () => {
    server = await new TestKubeApi().start();
    kubeconfig = await server.writeKubeconfig();
    server.upsert("Service", service("web", [{ port: 80, name: "http" }]));
    server.upsert("EndpointSlice", slice("web", [{ name: "http", port: 8080 }], ["10.1.0.1"], { name: "web-a" }));
    server.upsert("GatewayClass", gatewayClass());
    server.upsert("Gateway", gateway("gw", [{ name: "http", port: 8081 }]));
    server.upsert(
      "HTTPRoute",
      httpRoute("r", { parentRefs: [{ name: "gw" }], rules: [{ backendRefs: [{ name: "web", port: 80 }] }] }),
    );
    server.upsert("ReferenceGrant", referenceGrant("g", "default", { namespace: "apps" }));
  });

  afterEach(async () => {
    await server.stop();
  });

  it("are listed beside Services, in their own API versions, cluster-scoped GatewayClasses without a namespace", async () => {
    const snap = await listCluster(loadKubeConfig({ kubeconfig }));
    const kinds = snap.list.items.map(
      (i) => `${i.apiVersion} ${i.kind} ${i.metadata.namespace ?? "-"}/${i.metadata.name}`,
    );
    expect(kinds).toEqual([
      "v1 Service default/web",
      "discovery.k8s.io/v1 EndpointSlice default/web-a",
      "gateway.networking.k8s.io/v1 GatewayClass -/servicelb",
      "gateway.networking.k8s.io/v1 Gateway default/gw",
      "gateway.networking.k8s.io/v1 HTTPRoute default/r",
      "gateway.networking.k8s.io/v1beta1 ReferenceGrant default/g",
    ]);
    expect(snap.warnings).toEqual([]);
  });

  it("reach the snapshot and resolve into routing", async () => {
    const snap = await readLiveSnapshot({}, { kubeconfig });
    expect(snap.problems).toEqual([]);
    expect(snap.gateway?.httpRoutes.map((r) => r.metadata.name)).toEqual(["r"]);
    const routing = resolveGateway(snap, { httpPort: 80, reserved: new Map() })!;
    expect(routing.backends.map((b) => [b.name, b.servers])).toEqual([["gw:default:web:80", ["10.1.0.1:8080"]]]);
    expect(routing.status.httpRoutes[0]!.parents[0]!.conditions.map((c) => `${c.type} ${c.status}`)).toEqual([
      "Accepted True",
      "ResolvedRefs True",
    ]);
  });

  it("report the generation they describe, which a change of spec bumps (ObservedGenerationBump)", async () => {
    const observed = async () => {
      const snap = await readLiveSnapshot({}, { kubeconfig });
      const routing = resolveGateway(snap, { httpPort: 80, reserved: new Map() })!;
      return routing.status.httpRoutes[0]!.parents[0]!.conditions.map((c) => c.observedGeneration);
    };
    expect(await observed()).toEqual([1, 1]);
    server.upsert(
      "HTTPRoute",
      httpRoute("r", {
        parentRefs: [{ name: "gw" }],
        rules: [
          { matches: [{ path: { type: "PathPrefix", value: "/v2" } }], backendRefs: [{ name: "web", port: 80 }] },
        ],
      }),
    );
    expect(await observed()).toEqual([2, 2]);
  });

  it("are none, without a warning, on a cluster without the Gateway API CRDs", async () => {
    const bare = await new TestKubeApi({ gatewayApi: false }).start();
    try {
      bare.upsert("Service", service("web", [{ port: 80, name: "http" }]));
      const snap = await readLiveSnapshot({}, { kubeconfig: await bare.writeKubeconfig() });
      expect("gateway" in snap).toBe(false);
      expect(snap.services.map((s) => s.metadata.name)).toEqual(["web"]);
      expect(snap.listWarnings).toEqual([]);
    } finally {
      await bare.stop();
    }
  });

  it("are none, with a warning, where RBAC does not grant them; Services are served all the same", async () => {
    server.forbid("httproutes");
    const snap = await readLiveSnapshot({}, { kubeconfig });
    expect(snap.services.map((s) => s.metadata.name)).toEqual(["web"]);
    expect(snap.gateway?.httpRoutes).toEqual([]);
    expect(snap.listWarnings).toHaveLength(1);
    expect(snap.listWarnings[0]).toMatch(/^Gateway API httproutes are not served: .*forbidden/);
  });
});

describe("the emulator's Gateway API objects", () => {
  let server: TestKubeApi;

  beforeEach(async () => {
    server = await new TestKubeApi().start();
  });

  afterEach(async () => {
    await server.stop();
  });

  const put = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: "PUT",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  it("bumps metadata.generation on a change of spec only, and writes status through its subresource only", async () => {
    const created = server.upsert("HTTPRoute", httpRoute("r", { parentRefs: [{ name: "gw" }] }));
    expect(created.metadata.generation).toBe(1);
    const path = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/r";
    const status = {
      parents: [{ parentRef: { name: "gw" }, controllerName: "servicelb.io/gateway-controller", conditions: [] }],
    };

    const statusWrite = await put(`${path}/status`, { ...created, status });
    expect(statusWrite.status).toBe(200);
    const afterStatus = (await statusWrite.json()) as typeof created;
    expect(afterStatus.status).toEqual(status);
    expect(afterStatus.metadata.generation).toBe(1);

    // A write to the object keeps the status and bumps the generation when the spec changed.
    const specWrite = await put(path, {
      ...afterStatus,
      spec: { parentRefs: [{ name: "gw" }], hostnames: ["a.example"] },
      status: { parents: [] },
    });
    const afterSpec = (await specWrite.json()) as typeof created;
    expect(afterSpec.metadata.generation).toBe(2);
    expect(afterSpec.status).toEqual(status);

    // A status write at a resourceVersion no longer current conflicts, as the real server's does.
    const stale = await put(`${path}/status`, { ...afterStatus, status: { parents: [] } });
    expect(stale.status).toBe(409);
  });

  it("serves GatewayClasses at the cluster scope only", async () => {
    server.upsert("GatewayClass", gatewayClass());
    const get = (path: string) =>
      fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.token}` } });
    expect((await get("/apis/gateway.networking.k8s.io/v1/gatewayclasses/servicelb")).status).toBe(200);
    expect((await get("/apis/gateway.networking.k8s.io/v1/namespaces/default/gatewayclasses")).status).toBe(404);
    expect((await get("/apis/gateway.networking.k8s.io/v1beta1/gateways")).status).toBe(404);
  });
});
