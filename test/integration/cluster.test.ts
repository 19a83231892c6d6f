import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { listCluster, listClusterItems, type KubeItem } from "../../shared/adapters/cluster.js";
import { ClusterError } from "../../shared/adapters/cluster-error.js";
import { loadKubeConfig } from "../../shared/adapters/kube-config.js";
import { getRaw } from "../../shared/adapters/kube-get.js";
import type { RequestInfo } from "../../shared/dev/kube-api-emulator.js";
import { TestKubeApi } from "../support/kube-api.js";
import { endpoints, service, slice } from "../support/cluster-objects.js";

// Everything below goes through the real @kubernetes/client-node against the protocol fake.

const names = (items: KubeItem[], kind: string) =>
  items.filter((i) => i.kind === kind).map((i) => `${i.metadata.namespace}/${i.metadata.name}`);

const lists = (server: TestKubeApi, path: string): RequestInfo[] =>
  server.requests.filter((r) => r.path === path && r.query.watch === undefined);

async function clusterError(p: Promise<unknown>): Promise<ClusterError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ClusterError);
  return err as ClusterError;
}

describe("listCluster", () => {
  let server: TestKubeApi;
  let kubeconfig: string;

  beforeEach(async () => {
    server = await new TestKubeApi().start();
    kubeconfig = await server.writeKubeconfig();
    server.upsert("Service", service("default", "web", { tier: "front" }));
    server.upsert("Service", service("shop", "cart", { tier: "back" }));
    server.upsert("EndpointSlice", slice("default", "web", "10.1.0.1"));
    server.upsert("EndpointSlice", slice("shop", "cart", "10.1.0.2"));
  });

  afterEach(async () => {
    vi.useRealTimers();
    await server.stop();
  });

  it("lists Services and EndpointSlices of all namespaces in kubectl's List shape", async () => {
    const snap = await listCluster(loadKubeConfig({ kubeconfig }));

    expect(snap.revision).toBe("5");
    expect(snap.warnings).toEqual([]);
    expect(snap.stats.pages).toBe(6); // Services, EndpointSlices, and an empty page of each Gateway API kind
    expect(snap.list.apiVersion).toBe("v1");
    expect(snap.list.kind).toBe("List");
    expect(snap.list.metadata).toEqual({ resourceVersion: "5" });
    expect(names(snap.list.items, "Service")).toEqual(["default/web", "shop/cart"]);
    expect(names(snap.list.items, "EndpointSlice")).toEqual(["default/web-abcde", "shop/cart-abcde"]);
    // Exact wire JSON: string timestamps without client-node's ".000", no undefined keys, type meta set.
    const web = snap.list.items[0]!;
    expect(web).toStrictEqual({
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        creationTimestamp: "2024-01-02T03:04:05Z",
        labels: { tier: "front" },
        name: "web",
        namespace: "default",
        resourceVersion: "2",
        uid: web.metadata.uid,
      },
      spec: {
        clusterIP: "10.0.0.10",
        ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: "web" }],
        selector: { app: "web" },
        type: "ClusterIP",
      },
    });
    expect(typeof web.metadata.uid).toBe("string");
    expect(snap.list.items[2]).toStrictEqual({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.1.0.1"], conditions: { ready: true } }],
      metadata: {
        creationTimestamp: "2024-01-02T03:04:06Z",
        labels: { "kubernetes.io/service-name": "web" },
        name: "web-abcde",
        namespace: "default",
        resourceVersion: "4",
        uid: snap.list.items[2]!.metadata.uid,
      },
      ports: [{ name: "web", port: 8080, protocol: "TCP" }],
    });
    expect(snap.list).toStrictEqual(JSON.parse(JSON.stringify(snap.list)));
    expect(lists(server, "/api/v1/services")[0]!.query).toEqual({ limit: "500" });
  });

  it("serves lists as the real API does: type meta on the list, not on its items", async () => {
    const res = await fetch(`${server.url}/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices`, {
      headers: { authorization: `Bearer ${server.token}` },
    });
    const body = (await res.json()) as {
      kind: string;
      apiVersion: string;
      metadata: object;
      items: Array<Record<string, unknown>>;
    };

    expect(res.status).toBe(200);
    expect([body.kind, body.apiVersion]).toEqual(["EndpointSliceList", "discovery.k8s.io/v1"]);
    expect(body.metadata).toEqual({ resourceVersion: "5" });
    expect(body.items).toHaveLength(1);
    expect(Object.keys(body.items[0]!).sort()).toEqual(["addressType", "endpoints", "metadata", "ports"]);
  });

  it("lists one namespace through the namespaced paths", async () => {
    const snap = await listCluster(loadKubeConfig({ kubeconfig }), { namespace: "shop" });

    expect(names(snap.list.items, "Service")).toEqual(["shop/cart"]);
    expect(names(snap.list.items, "EndpointSlice")).toEqual(["shop/cart-abcde"]);
    expect(server.requests.map((r) => r.path).sort()).toEqual([
      "/api/v1/namespaces/shop/services",
      "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices",
      // GatewayClasses have no namespace: a Gateway in this one may name any.
      "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
      "/apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways",
      "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes",
      "/apis/gateway.networking.k8s.io/v1beta1/namespaces/shop/referencegrants",
    ]);
  });

  it("filters Services by label selector but keeps every EndpointSlice", async () => {
    server.upsert("Service", service("default", "admin", { tier: "front", internal: "yes" }));
    const kc = loadKubeConfig({ kubeconfig });

    const front = await listCluster(kc, { labelSelector: "tier=front" });
    expect(names(front.list.items, "Service")).toEqual(["default/admin", "default/web"]);
    expect(names(front.list.items, "EndpointSlice")).toEqual(["default/web-abcde", "shop/cart-abcde"]);

    const notInternal = await listCluster(kc, { labelSelector: "tier,!internal" });
    expect(names(notInternal.list.items, "Service")).toEqual(["default/web", "shop/cart"]);

    const notBack = await listCluster(kc, { labelSelector: "tier!=back" });
    expect(names(notBack.list.items, "Service")).toEqual(["default/admin", "default/web"]);

    expect(lists(server, "/api/v1/services").map((r) => r.query.labelSelector)).toEqual([
      "tier=front",
      "tier,!internal",
      "tier!=back",
    ]);
    expect(
      lists(server, "/apis/discovery.k8s.io/v1/endpointslices").every((r) => r.query.labelSelector === undefined),
    ).toBe(true);
  });

  it("pages through long lists with limit and continue", async () => {
    for (let i = 0; i < 5; i++) server.upsert("Service", service("paged", `svc-${i}`));

    const snap = await listCluster(loadKubeConfig({ kubeconfig }), { pageSize: 3 });

    const serviceNames = names(snap.list.items, "Service");
    expect(serviceNames).toEqual([
      "default/web",
      "paged/svc-0",
      "paged/svc-1",
      "paged/svc-2",
      "paged/svc-3",
      "paged/svc-4",
      "shop/cart",
    ]);
    const requests = lists(server, "/api/v1/services");
    expect(requests.map((r) => r.query.limit)).toEqual(["3", "3", "3"]);
    expect(requests.map((r) => r.query.continue === undefined)).toEqual([true, false, false]);
    expect(snap.stats.pages).toBe(8); // three of Services, one of EndpointSlices, one of each Gateway API kind
    expect(snap.revision).toBe("10");
  });

  it("restarts a list whose continue token expired and returns each object once", async () => {
    for (let i = 0; i < 4; i++) server.upsert("Service", service("paged", `svc-${i}`));
    let expired = false;
    server.onRequest((req) => {
      if (req.path === "/api/v1/services" && req.query.continue && !expired) {
        expired = true;
        server.expireContinueTokens();
        // Written between the pages: the restarted list must contain it, from a newer revision.
        server.upsert("Service", service("aaa", "late"));
      }
    });

    const snap = await listCluster(loadKubeConfig({ kubeconfig }), { pageSize: 2 });

    const serviceNames = names(snap.list.items, "Service");
    expect(serviceNames).toEqual([
      "aaa/late",
      "default/web",
      "paged/svc-0",
      "paged/svc-1",
      "paged/svc-2",
      "paged/svc-3",
      "shop/cart",
    ]);
    expect(new Set(serviceNames).size).toBe(serviceNames.length);
    const statuses = lists(server, "/api/v1/services").map((r) => r.status);
    expect(statuses).toEqual([200, 410, 200, 200, 200, 200]);
    expect(snap.revision).toBe("10");
    expect(snap.list.metadata.resourceVersion).toBe("10");
  });

  it("gives up with a transient error after the continue token expires four times", async () => {
    for (let i = 0; i < 4; i++) server.upsert("Service", service("paged", `svc-${i}`));
    server.onRequest((req) => {
      if (req.path === "/api/v1/services" && req.query.continue) server.expireContinueTokens();
    });

    const err = await clusterError(listCluster(loadKubeConfig({ kubeconfig }), { pageSize: 2 }));

    expect(err.kind).toBe("unavailable");
    expect(err.transient).toBe(true);
    expect(err.status).toBe(410);
    expect(err.message).toContain("the continue token expired 4 times (410)");
    expect(lists(server, "/api/v1/services").filter((r) => r.status === 410)).toHaveLength(4);
  });

  it("falls back to v1 Endpoints, with a warning, when the EndpointSlice API is missing", async () => {
    const old = await new TestKubeApi({ endpointSlices: false, gatewayApi: false }).start();
    try {
      old.upsert("Service", service("default", "web"));
      old.upsert("Endpoints", endpoints("default", "web", "10.1.0.1"));
      const discoveryDoc = await fetch(`${old.url}/apis/discovery.k8s.io/v1`, {
        headers: { authorization: `Bearer ${old.token}` },
      });
      expect(discoveryDoc.status).toBe(404);

      const snap = await listCluster(loadKubeConfig({ kubeconfig: await old.writeKubeconfig() }));

      expect(snap.warnings).toEqual([
        `the API server at ${old.url} does not serve EndpointSlices (discovery.k8s.io/v1 answered 404); using the deprecated v1 Endpoints API instead`,
      ]);
      expect(snap.list.items.map((i) => `${i.apiVersion} ${i.kind} ${i.metadata.name}`)).toEqual([
        "v1 Service web",
        "v1 Endpoints web",
      ]);
      expect(snap.list.items[1]).toMatchObject({
        subsets: [{ addresses: [{ ip: "10.1.0.1" }], ports: [{ name: "web", port: 8080, protocol: "TCP" }] }],
      });
      expect(snap.stats.pages).toBe(2); // the 404 brought no page
      expect(old.requests.map((r) => `${r.path} ${r.status}`).sort()).toEqual([
        "/api/v1/endpoints 200",
        "/api/v1/services 200",
        "/apis/discovery.k8s.io/v1 404",
        "/apis/discovery.k8s.io/v1/endpointslices 404",
        // No Gateway API CRDs either: none of their objects, and no warning.
        "/apis/gateway.networking.k8s.io/v1/gatewayclasses 404",
        "/apis/gateway.networking.k8s.io/v1/gateways 404",
        "/apis/gateway.networking.k8s.io/v1/httproutes 404",
        "/apis/gateway.networking.k8s.io/v1beta1/referencegrants 404",
      ]);
    } finally {
      await old.stop();
    }
  });

  it("reports rejected credentials as unauthorized", async () => {
    const bad = await server.writeKubeconfig({ contexts: [{ name: "stale", token: "expired-token" }] });

    const err = await clusterError(listCluster(loadKubeConfig({ kubeconfig: bad })));

    expect(err.kind).toBe("unauthorized");
    expect(err.transient).toBe(false);
    expect(err.status).toBe(401);
    expect(err.message).toContain("the API server rejected the credentials (401) for list");
    expect(err.message).toContain('kubeconfig user "stale" (context "stale")');
  });

  it("names the missing RBAC permission on 403, cluster-wide and per namespace", async () => {
    server.forbid("services");
    const kc = loadKubeConfig({ kubeconfig });

    const all = await clusterError(listCluster(kc));
    expect(all.kind).toBe("forbidden");
    expect(all.transient).toBe(false);
    expect(all.message).toContain(
      'services is forbidden: User "system:serviceaccount:servicelb:servicelb" cannot list resource "services" in API group "" at the cluster scope',
    );
    expect(all.message).toContain('RBAC: grant "list" on "services" (group "") cluster-wide');

    server.reset();
    server.forbid("endpointslices");
    const ns = await clusterError(listCluster(kc, { namespace: "shop" }));
    expect(ns.kind).toBe("forbidden");
    expect(ns.message).toContain(
      'RBAC: grant "list" on "endpointslices" (group "discovery.k8s.io") in namespace "shop"',
    );
  });

  it("reports a 500 as a transient error with the server's message", async () => {
    server.failNext({
      status: 500,
      message: "etcdserver: leader changed",
      match: (r) => r.path === "/api/v1/services",
    });

    const err = await clusterError(listCluster(loadKubeConfig({ kubeconfig })));

    expect(err.kind).toBe("unavailable");
    expect(err.transient).toBe(true);
    expect(err.status).toBe(500);
    expect(err.message).toBe(
      `the API server answered 500 to list ${server.url}/api/v1/services: etcdserver: leader changed`,
    );
  });

  it("times out a request that takes longer than timeoutMs", async () => {
    // Every request has the same timeoutMs: on the wall clock, a busy machine can make the Services
    // list, which should succeed, time out first. Fake time stands still until that list is in,
    // which listClusterItems's `keep` reports (listCluster is listClusterItems keeping every item).
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    server.delay({ ms: 2000, match: (r) => r.path === "/apis/discovery.k8s.io/v1/endpointslices" });
    let servicesListed!: () => void;
    const servicesIn = new Promise<void>((resolve) => (servicesListed = resolve));
    let settled = false;
    const failure = clusterError(
      listClusterItems(loadKubeConfig({ kubeconfig }), { timeoutMs: 200 }, (item) => {
        if (item.kind === "Service") servicesListed();
        return item;
      }).finally(() => (settled = true)),
    );

    await servicesIn;
    await vi.advanceTimersByTimeAsync(199);
    // One turn of the event loop lets an aborted request's error reach `settled`.
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const err = await failure;

    expect(err.kind).toBe("timeout");
    expect(err.transient).toBe(true);
    expect(err.message).toBe(
      `no answer within 200 ms from the API server at ${server.url} (list ${server.url}/apis/discovery.k8s.io/v1/endpointslices)`,
    );
  });

  it("reports a refused connection as transient", async () => {
    const gone = await new TestKubeApi().start();
    const config = await gone.writeKubeconfig();
    await gone.stop();

    const err = await clusterError(listCluster(loadKubeConfig({ kubeconfig: config })));

    expect(err.kind).toBe("unavailable");
    expect(err.transient).toBe(true);
    expect(err.message).toContain(`cannot reach the API server at ${gone.url}`);
    expect(err.message).toContain("ECONNREFUSED");
  });

  it("takes the highest list resourceVersion, compared as a number", async () => {
    const big = await new TestKubeApi({ resourceVersion: 97 }).start();
    try {
      big.upsert("Service", service("default", "web")); // revision 98
      big.upsert("EndpointSlice", slice("default", "web", "10.1.0.1")); // revision 99
      // A write lands between the two lists, whichever comes first, so one is served at revision 99
      // and the other at 100 (as strings, "99" is the larger). It writes v1 Endpoints, which neither
      // list reads while the EndpointSlice API is served, so both lists hold the same items either way.
      big.onRequest(() => {
        if (big.requests.length === 2) big.upsert("Endpoints", endpoints("default", "web", "10.1.0.1"));
      });

      const snap = await listCluster(loadKubeConfig({ kubeconfig: await big.writeKubeconfig() }));

      expect(big.requests.map((r) => r.path).sort()).toEqual([
        "/api/v1/services",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
        "/apis/gateway.networking.k8s.io/v1/gateways",
        "/apis/gateway.networking.k8s.io/v1/httproutes",
        "/apis/gateway.networking.k8s.io/v1beta1/referencegrants",
      ]);
      expect(snap.list.items.map((i) => i.metadata.resourceVersion)).toEqual(["98", "99"]);
      expect(snap.revision).toBe("100");
      expect(snap.list.metadata.resourceVersion).toBe("100");
    } finally {
      await big.stop();
    }
  });
});

describe("loadKubeConfig", () => {
  let server: TestKubeApi;

  beforeEach(async () => {
    server = await new TestKubeApi().start();
  });

  afterEach(async () => {
    vi.unstubAllEnvs();
    await server.stop();
  });

  it("selects a context by name and rejects unknown ones", async () => {
    const file = await server.writeKubeconfig({ contexts: [{ name: "stale", token: "nope" }, { name: "good" }] });

    const kc = loadKubeConfig({ kubeconfig: file, context: "good" });
    expect(kc.getCurrentContext()).toBe("good");
    server.upsert("Service", service("default", "web"));
    expect(names((await listCluster(kc)).list.items, "Service")).toEqual(["default/web"]);

    const err = (() => {
      try {
        loadKubeConfig({ kubeconfig: file, context: "prod" });
      } catch (e) {
        return e as ClusterError;
      }
    })();
    expect(err).toBeInstanceOf(ClusterError);
    expect(err?.message).toBe('kubeconfig context "prod" does not exist (known contexts: "stale", "good")');
  });

  it("reads a kubeconfig once while its file is unchanged, and again once it is rewritten", async () => {
    const file = await server.writeKubeconfig({ contexts: [{ name: "a" }, { name: "b" }] });
    const first = loadKubeConfig({ kubeconfig: file });
    expect(loadKubeConfig({ kubeconfig: file })).toBe(first);
    // Another context is another kubeconfig, each kept.
    const b = loadKubeConfig({ kubeconfig: file, context: "b" });
    expect(b).not.toBe(first);
    expect(b.getCurrentContext()).toBe("b");
    expect(loadKubeConfig({ kubeconfig: file, context: "b" })).toBe(b);
    // A rotated credential: the file is rewritten, and the next load reads it.
    const rotated = readFileSync(file, "utf8").replace(/token: \S+/, "token: rotated");
    expect(rotated).toContain("token: rotated");
    writeFileSync(file, rotated);
    const again = loadKubeConfig({ kubeconfig: file });
    expect(again).not.toBe(first);
    expect(again.getCurrentUser()?.token).toBe("rotated");
    // Rotated again to a token of the same length, a moment later: the change of time tells.
    await new Promise((r) => setTimeout(r, 20));
    writeFileSync(file, rotated.replace("token: rotated", "token: rotates"));
    expect(loadKubeConfig({ kubeconfig: file }).getCurrentUser()?.token).toBe("rotates");
    rmSync(file);
    expect(() => loadKubeConfig({ kubeconfig: file })).toThrow(/does not exist/);
  });

  it("uses the service account inside a pod unless a kubeconfig is given", async () => {
    vi.stubEnv("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    vi.stubEnv("KUBERNETES_SERVICE_PORT", "443");
    vi.stubEnv("KUBECONFIG", "");

    const inCluster = loadKubeConfig();
    expect(inCluster.getCurrentCluster()?.server).toBe("https://10.96.0.1:443");
    expect(inCluster.getCurrentUser()?.authProvider?.config.tokenFile).toBe(
      "/var/run/secrets/kubernetes.io/serviceaccount/token",
    );

    const file = await server.writeKubeconfig();
    expect(loadKubeConfig({ kubeconfig: file }).getCurrentCluster()?.server).toBe(server.url);
    vi.stubEnv("KUBECONFIG", file);
    expect(loadKubeConfig().getCurrentCluster()?.server).toBe(server.url);
  });
});

describe("getRaw", () => {
  it("sends a GET again on a fresh connection when the server dropped the kept-alive one it went out on", async () => {
    // The second request on each connection finds it gone, as after an idle timeout on the server.
    const sockets = new Map<Socket, number>();
    let connections = 0;
    const server = createServer((req, res) => {
      const n = (sockets.get(req.socket) ?? 0) + 1;
      sockets.set(req.socket, n);
      if (n > 1) {
        req.socket.destroy();
        return;
      }
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ path: req.url }));
    });
    server.on("connection", () => (connections += 1));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [
          { name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true },
        ],
        users: [{ name: "u", token: "t" }],
        contexts: [{ name: "x", cluster: "c", user: "u" }],
        currentContext: "x",
      });
      const signal = AbortSignal.timeout(5000);
      expect(await getRaw(kc, "/one", {}, signal)).toEqual({ path: "/one" });
      expect(await getRaw(kc, "/two", {}, signal)).toEqual({ path: "/two" });
      expect(connections).toBe(2);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
