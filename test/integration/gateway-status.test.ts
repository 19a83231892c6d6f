/*
 * The Gateway API status a reconcile pass writes, through the real client-node against the
 * Kubernetes API emulator, with s3rver as the store: what is written, that a pass with nothing
 * changed writes nothing, other controllers' entries, lastTransitionTime, Programmed from the
 * agents' reports, and failures that never fail the pass.
 */
import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import * as functions from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import { createObjectStore, type ObjectStore } from "../../shared/adapters/store.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { createReconcileHandler, createReconciler, type Reconciler } from "../../shared/app/reconcile.js";
import { loadKubeConfig } from "../../shared/adapters/kube-config.js";
import { startEventBridge } from "../../shared/dev/event-bridge.js";
import type { KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { agentReport, service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../support/gateway-fixtures.js";
import { TestKubeApi } from "../support/kube-api.js";
import { waitFor } from "../support/net.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

const log = createLogger("gateway-status-test", "silent");
const OTHER = {
  parentRef: { group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "default", name: "theirs" },
  controllerName: "example.com/other-controller",
  conditions: [
    {
      type: "Accepted",
      status: "True",
      reason: "Accepted",
      message: "theirs",
      observedGeneration: 1,
      lastTransitionTime: "2020-01-01T00:00:00Z",
    },
  ],
};

type Condition = {
  type: string;
  status: string;
  reason: string;
  observedGeneration: number;
  lastTransitionTime: string;
};
type RouteStatus = { parents: Array<{ controllerName: string; conditions: Condition[] }> };
type GatewayStatusOnObject = {
  conditions: Condition[];
  listeners: Array<{ name: string; attachedRoutes: number; conditions: Condition[] }>;
};

let s3: TestS3;
let dir: string;
let api: TestKubeApi;
let reconciler: Reconciler;
let store: ObjectStore;
let prefixes = 0;
let kubeconfig: string;

const route = (spec: Record<string, unknown> = {}, opts = {}) =>
  httpRoute(
    "r",
    { parentRefs: [{ name: "gw" }], rules: [{ backendRefs: [{ name: "web", port: 80 }] }], ...spec },
    opts,
  ) as unknown as KubeObject;
const statusWrites = () => api.requests.filter((r) => r.method === "PUT" && r.path.endsWith("/status"));
const objectOf = (kind: "Gateway" | "HTTPRoute" | "GatewayClass", name: string) => api.read(kind, "default", name)!;
async function pass(): Promise<string> {
  const result = await reconciler.reconcileNow({ id: `t-${Date.now()}`, type: "test" });
  await reconciler.idle();
  return result.key!;
}

beforeAll(async () => {
  s3 = await startS3();
  vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
  dir = await mkdtemp(join(tmpdir(), "servicelb-gateway-status-"));
});

afterAll(async () => {
  vi.unstubAllEnvs();
  await s3.stop();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(async () => {
  api = await new TestKubeApi().start();
  api.upsert("Service", service("web", [{ name: "http", port: 80, targetPort: 8080 }]) as unknown as KubeObject);
  api.upsert(
    "EndpointSlice",
    slice("web", [{ name: "http", port: 8080 }], ["10.1.0.1"], { name: "web-a" }) as unknown as KubeObject,
  );
  api.upsert("GatewayClass", gatewayClass() as unknown as KubeObject);
  api.upsert("Gateway", gateway("gw", [{ name: "http", port: 8081 }]) as unknown as KubeObject);
  api.upsert("HTTPRoute", { ...route(), status: { parents: [OTHER] } });
  const url = `s3://${s3.bucket}/gs${++prefixes}/`;
  kubeconfig = await api.writeKubeconfig({ dir: await mkdtemp(join(dir, "kube-")) });
  const settings = loadFunctionSettings({
    SERVICELB_STORE: url,
    SERVICELB_STORE_ENDPOINT: s3.endpoint,
    SERVICELB_STORE_PATH_STYLE: "true",
    SERVICELB_KUBECONFIG: kubeconfig,
  });
  reconciler = createReconciler(settings, { log });
  store = createObjectStore({ url, endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
});

afterEach(async () => {
  await reconciler.close();
  store.close();
  await api.stop();
});

describe("Gateway API status written by a pass", () => {
  it("writes the route's parent, the Gateway with its listeners and the class, each once: a second pass writes nothing", async () => {
    await pass();
    expect(
      statusWrites()
        .map((r) => r.path)
        .sort(),
    ).toEqual([
      "/apis/gateway.networking.k8s.io/v1/gatewayclasses/servicelb/status",
      "/apis/gateway.networking.k8s.io/v1/namespaces/default/gateways/gw/status",
      "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/r/status",
    ]);
    const routeStatus = objectOf("HTTPRoute", "r").status as RouteStatus;
    // The other controller's entry is kept as it was; servicelb's is added beside it.
    expect(routeStatus.parents[0]).toEqual(OTHER);
    expect(routeStatus.parents[1]!.controllerName).toBe("servicelb.io/gateway-controller");
    expect(routeStatus.parents[1]!.conditions.map((c) => `${c.type} ${c.status} ${c.observedGeneration}`)).toEqual([
      "Accepted True 1",
      "ResolvedRefs True 1",
    ]);
    const gw = objectOf("Gateway", "gw").status as GatewayStatusOnObject;
    expect(gw.listeners).toMatchObject([{ name: "http", attachedRoutes: 1 }]);
    // No node reports to this store: nobody runs the config yet.
    expect(gw.conditions.find((c) => c.type === "Programmed")).toMatchObject({ status: "False", reason: "Pending" });
    expect((objectOf("GatewayClass", "servicelb").status as { conditions: Condition[] }).conditions[0]).toMatchObject({
      type: "Accepted",
      status: "True",
      observedGeneration: 1,
    });

    const before = statusWrites().length;
    await pass();
    expect(statusWrites().length).toBe(before);
  });

  it("follows a route's new generation, keeping lastTransitionTime where the status did not change", async () => {
    await pass();
    const first = (objectOf("HTTPRoute", "r").status as RouteStatus).parents[1]!.conditions;
    await new Promise((r) => setTimeout(r, 20));
    // A backend that does not exist: ResolvedRefs turns False; Accepted stays True.
    api.upsert("HTTPRoute", {
      ...objectOf("HTTPRoute", "r"),
      spec: route({ rules: [{ backendRefs: [{ name: "missing", port: 80 }] }] }).spec,
    });
    await pass();
    const parents = (objectOf("HTTPRoute", "r").status as RouteStatus).parents;
    expect(parents[0]).toEqual(OTHER);
    const [accepted, resolved] = parents[1]!.conditions;
    expect(accepted).toMatchObject({ status: "True", observedGeneration: 2 });
    expect(accepted!.lastTransitionTime).toBe(first[0]!.lastTransitionTime);
    expect(resolved).toMatchObject({ status: "False", reason: "BackendNotFound", observedGeneration: 2 });
    expect(resolved!.lastTransitionTime).not.toBe(first[1]!.lastTransitionTime);
  });

  it("removes its own parent entry when the route leaves servicelb's Gateways, and keeps the others'", async () => {
    await pass();
    api.upsert("HTTPRoute", {
      ...objectOf("HTTPRoute", "r"),
      spec: route({ parentRefs: [{ name: "theirs" }] }).spec,
    });
    await pass();
    expect((objectOf("HTTPRoute", "r").status as RouteStatus).parents).toEqual([OTHER]);
    expect((objectOf("Gateway", "gw").status as GatewayStatusOnObject).listeners[0]!.attachedRoutes).toBe(0);
  });

  it("says Programmed once every reporting node runs the config that holds the Gateway, Pending while one runs an older one", async () => {
    const key = await pass();
    const programmed = () => {
      const gw = objectOf("Gateway", "gw").status as GatewayStatusOnObject;
      return [gw.conditions, gw.listeners[0]!.conditions].map((cs) => {
        const c = cs.find((x) => x.type === "Programmed")!;
        return `${c.status} ${c.reason}`;
      });
    };
    const applied = (k: string) => ({
      key: k,
      sha256: "0".repeat(64),
      revision: "1",
      appliedAt: new Date().toISOString(),
      how: "reload",
    });
    await store.putStatus("node-a", { ...agentReport("node-a"), applied: applied(key) });
    await store.putStatus("node-b", { ...agentReport("node-b"), applied: null });
    await pass();
    expect(programmed()).toEqual(["False Pending", "False Pending"]);
    expect(
      (objectOf("Gateway", "gw").status as GatewayStatusOnObject).conditions.find((c) => c.type === "Programmed"),
    ).toMatchObject({ observedGeneration: 1 });

    await store.putStatus("node-b", { ...agentReport("node-b"), applied: applied(key) });
    await pass();
    expect(programmed()).toEqual(["True Programmed", "True Programmed"]);

    // A change of an unrelated Service publishes a newer config: the Gateway stays Programmed,
    // since the config that holds it is still the one the nodes run.
    api.upsert("Service", service("other", [{ name: "http", port: 80 }]) as unknown as KubeObject);
    const newer = await pass();
    expect(newer).not.toBe(key);
    expect(programmed()).toEqual(["True Programmed", "True Programmed"]);

    // A route change is in the newest config only: Pending until the nodes run it.
    api.upsert("HTTPRoute", {
      ...objectOf("HTTPRoute", "r"),
      spec: route({ hostnames: ["shop.example.com"] }).spec,
    });
    await pass();
    expect(programmed()).toEqual(["False Pending", "False Pending"]);
  });

  it("never fails the pass: a refused write is logged and written by the next pass", async () => {
    api.failNext({ status: 500, times: 3, match: (r) => r.method === "PUT" && r.path.endsWith("/status") });
    const result = await reconciler.reconcileNow({ id: "fail", type: "test" });
    expect(result.status).toBe("published");
    await reconciler.idle();
    expect(objectOf("HTTPRoute", "r").status).toEqual({ parents: [OTHER] });
    await pass();
    expect((objectOf("HTTPRoute", "r").status as RouteStatus).parents).toHaveLength(2);
  });
});

describe("Gateway API events", () => {
  it("serve an HTTPRoute edit in the local stack without waiting for the resync, and write its status", async () => {
    functions.cloudEvent("reconcile-gateway-events", createReconcileHandler(reconciler));
    const server = getTestServer("reconcile-gateway-events");
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const delivered: string[] = [];
    const stop = startEventBridge({
      kc: loadKubeConfig({ kubeconfig }),
      sink: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
      // Only the initial sync's tick: anything later comes from a watch event.
      resyncMs: 3_600_000,
      log,
      trace: (ev, fields) => {
        if (ev === "delivered") delivered.push(String(fields?.type));
      },
    });
    try {
      const newestConfig = async () => {
        const latest = await store.latest();
        return latest ? (await store.get(latest.key)).config : "";
      };
      await waitFor("the first config", async () =>
        (await newestConfig()).includes("gw:default:web:80") ? true : undefined,
      );
      api.upsert("HTTPRoute", {
        ...objectOf("HTTPRoute", "r"),
        spec: route({ hostnames: ["edited.example.com"] }).spec,
      });
      await waitFor("the edited route in a published config", async () =>
        (await newestConfig()).includes("edited.example.com") ? true : undefined,
      );
      await waitFor("the route's status at its new generation", async () => {
        const parents = (objectOf("HTTPRoute", "r").status as RouteStatus | undefined)?.parents ?? [];
        return parents[1]?.conditions[0]?.observedGeneration === 2 ? true : undefined;
      });
      expect(delivered.filter((t) => t === "dev.knative.sources.ping")).toHaveLength(1);
      expect(delivered).toContain("dev.knative.apiserver.resource.update");
    } finally {
      stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
