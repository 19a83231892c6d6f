import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import { readLiveSnapshot } from "../../shared/adapters/snapshot-source.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { createReconciler } from "../../shared/app/reconcile.js";
import { type Kind, KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../support/gateway-fixtures.js";
import { findObject, groupOf, kustomize, type K8sObject } from "../support/infra-manifests.js";
import { containerOf, PodView, podSpecOf } from "../support/infra-pods.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

// RBAC is derived from what the code does, not from a list beside it: the functions run against
// the Kubernetes API emulator with the environment their manifest gives them, every request is
// recorded, and the ClusterRole bound to their account must grant exactly those accesses.

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

const OBJECTS = kustomize("infra/overlays/minio");
const log = createLogger("rbac-test", "silent");

/** The RBAC verb of each write method. */
const WRITE_VERBS: Record<string, string> = { POST: "create", PUT: "update", PATCH: "patch", DELETE: "delete" };

/** "group/resource[/subresource]:verb" for each resource request (discovery documents need no RBAC). */
function accessOf(req: { method: string; path: string; query: Record<string, string> }): string | undefined {
  const core = /^\/api\/v1\/(?:namespaces\/[^/]+\/)?([a-z]+)(?:\/([^/]+))?$/.exec(req.path);
  const grouped = /^\/apis\/([^/]+)\/[^/]+\/(?:namespaces\/[^/]+\/)?([a-z]+)(?:\/([^/]+)(\/status)?)?$/.exec(req.path);
  const [group, plural, name, sub] = core
    ? ["", core[1], core[2], undefined]
    : grouped
      ? [grouped[1], grouped[2], grouped[3], grouped[4]]
      : [];
  if (plural === undefined) return undefined;
  const resource = `${plural}${sub ?? ""}`;
  const verb =
    req.method !== "GET"
      ? (WRITE_VERBS[req.method] ?? req.method)
      : name
        ? "get"
        : req.query.watch === "true" || req.query.watch === "1"
          ? "watch"
          : "list";
  return `${group}/${resource}:${verb}`;
}

/** What the ClusterRoles bound to `account` (namespace servicelb) grant. */
function granted(account: string): Set<string> {
  const out = new Set<string>();
  const bindings = OBJECTS.filter((o) => o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding") as Array<
    K8sObject & {
      roleRef: { kind: string; name: string };
      subjects: Array<{ kind: string; name: string; namespace?: string }>;
    }
  >;
  for (const b of bindings.filter((b) =>
    b.subjects.some((s) => s.kind === "ServiceAccount" && s.name === account && s.namespace === "servicelb"),
  )) {
    const role = findObject(OBJECTS, b.roleRef.kind, b.roleRef.name) as K8sObject & { rules: Rule[] };
    for (const r of role.rules)
      for (const g of r.apiGroups) for (const res of r.resources) for (const v of r.verbs) out.add(`${g}/${res}:${v}`);
  }
  return out;
}

/** The reconcile function's own environment, pointed at the emulator and at s3rver. */
function reconcileEnv(kubeconfig: string, s3: TestS3, extra: Record<string, string> = {}): Record<string, string> {
  const { pod, container } = containerOf(
    findObject(OBJECTS, "Service", "reconcile", "serving.knative.dev"),
    "reconcile",
  );
  return {
    ...new PodView(OBJECTS).env(pod, container, {}, mkdtempSync(join(tmpdir(), "servicelb-rbac-"))),
    SERVICELB_KUBECONFIG: kubeconfig,
    SERVICELB_STORE: `s3://${s3.bucket}`,
    SERVICELB_STORE_ENDPOINT: s3.endpoint,
    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
    ...extra,
  };
}

/** One reconcile pass and one live dry run; returns the accesses they made. */
async function accessesOfOnePass(
  options: { endpointSlices: boolean; env?: Record<string, string> },
  s3: TestS3,
): Promise<Set<string>> {
  const api = await new KubeApiEmulator({ endpointSlices: options.endpointSlices }).start();
  try {
    api.upsert(
      "Service",
      service("web", [{ port: 80, targetPort: 8080 }], { namespace: "shop" }) as unknown as KubeObject,
    );
    // Gateway API objects of servicelb's class, whose status the pass writes; each kind's first
    // write meets a change made meanwhile (409), which has the writer read the object again.
    const objects: Array<[Kind, KubeObject]> = [
      ["GatewayClass", gatewayClass() as unknown as KubeObject],
      ["Gateway", gateway("gw", [{ name: "http", port: 8081 }], { namespace: "shop" }) as unknown as KubeObject],
      [
        "HTTPRoute",
        httpRoute(
          "web",
          { parentRefs: [{ name: "gw" }], rules: [{ backendRefs: [{ name: "web", port: 80 }] }] },
          { namespace: "shop" },
        ) as unknown as KubeObject,
      ],
    ];
    for (const [kind, obj] of objects) api.upsert(kind, obj);
    const conflicted = new Set<string>();
    api.onRequest((req) => {
      const hit = objects.find(([, o]) => req.path.endsWith(`s/${o.metadata.name}/status`));
      if (req.method !== "PUT" || !hit || conflicted.has(hit[0])) return;
      conflicted.add(hit[0]);
      api.upsert(...hit);
    });
    if (options.endpointSlices) {
      api.upsert(
        "EndpointSlice",
        slice("web", [{ port: 8080 }], ["10.0.0.1"], { namespace: "shop" }) as unknown as KubeObject,
      );
      // The agent Service's slice: the notifier lists it, and its ping is refused (never fatal).
      api.upsert(
        "EndpointSlice",
        slice("agent", [{ name: "agent", port: 1 }], ["127.0.0.1"], {
          namespace: "servicelb",
          name: "agent-x1",
        }) as unknown as KubeObject,
      );
    }
    const env = reconcileEnv(await api.writeKubeconfig(), s3, options.env);
    // The AWS SDK reads its credentials from the process environment, as it does in the pod.
    for (const [name, value] of Object.entries(env)) if (name.startsWith("AWS_")) vi.stubEnv(name, value);
    const settings = loadFunctionSettings(env);
    const reconciler = createReconciler(settings, { log });
    try {
      await reconciler.reconcileNow({ id: "rbac", type: "test" });
      // A warm instance's head start reads the objects events name, one by one.
      for (const obj of [
        service("web", [{ port: 80, targetPort: 8080 }], { namespace: "shop" }),
        slice("web", [{ port: 8080 }], ["10.0.0.1"], { namespace: "shop" }),
      ])
        await reconciler.reconcile({
          specversion: "1.0",
          id: `rbac-${obj.kind}`,
          type: "dev.knative.apiserver.resource.update",
          source: "https://kube",
          data: obj,
        });
    } finally {
      await reconciler.close();
    }
    expect([...conflicted].sort(), "status writes that met a conflict").toEqual([
      "Gateway",
      "GatewayClass",
      "HTTPRoute",
    ]);
    // The render function's live dry run (shared/app/render-http.ts) reads the same way.
    await readLiveSnapshot(settings.options, { kubeconfig: settings.kubeconfig });
    return new Set(api.requests.map(accessOf).filter((a): a is string => a !== undefined));
  } finally {
    await api.stop();
  }
}

describe("RBAC", () => {
  let s3: TestS3;
  let calls: Set<string>;

  beforeAll(async () => {
    s3 = await startS3();
    calls = new Set([
      ...(await accessesOfOnePass({ endpointSlices: true }, s3)),
      ...(await accessesOfOnePass({ endpointSlices: true, env: { SERVICELB_NAMESPACE: "shop" } }, s3)),
      // A cluster without discovery.k8s.io/v1: the Endpoints fallback.
      ...(await accessesOfOnePass({ endpointSlices: false }, s3)),
    ]);
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await s3?.stop();
  });

  it("grants the functions' account exactly the accesses the functions make", () => {
    expect(calls).toContain("/services:list");
    expect(calls).toContain("discovery.k8s.io/endpointslices:list");
    expect(calls).toContain("/endpoints:list");
    expect(calls).toContain("/services:get");
    expect(calls).toContain("discovery.k8s.io/endpointslices:get");
    expect(calls).toContain("gateway.networking.k8s.io/httproutes:list");
    for (const kind of ["gatewayclasses", "gateways", "httproutes"])
      expect(calls).toContain(`gateway.networking.k8s.io/${kind}/status:update`);
    for (const kind of ["gatewayclasses", "gateways", "httproutes"])
      expect(calls).toContain(`gateway.networking.k8s.io/${kind}:get`);
    const account = podSpecOf(findObject(OBJECTS, "Service", "reconcile", "serving.knative.dev"))!.serviceAccountName!;
    expect(podSpecOf(findObject(OBJECTS, "Service", "render", "serving.knative.dev"))!.serviceAccountName).toBe(
      account,
    );
    expect([...granted(account)].sort()).toEqual([...calls].sort());
  });

  it("grants the ApiServerSources' account get, list and watch on what they watch, which is what the functions list", () => {
    const sources = ["cluster-changes", "gateway-changes"].map(
      (name) =>
        findObject(OBJECTS, "ApiServerSource", name) as K8sObject & {
          spec: { serviceAccountName: string; resources: Array<{ apiVersion: string; kind: string }> };
        },
    );
    const account = sources[0]!.spec.serviceAccountName;
    expect(sources[1]!.spec.serviceAccountName).toBe(account);
    // Knative's controller checks these three verbs in every watched namespace before it starts the adapter.
    const plural: Record<string, string> = {
      Service: "services",
      EndpointSlice: "endpointslices",
      GatewayClass: "gatewayclasses",
      Gateway: "gateways",
      HTTPRoute: "httproutes",
      ReferenceGrant: "referencegrants",
    };
    const watched = sources.flatMap((s) => s.spec.resources.map((r) => `${groupOf(r.apiVersion)}/${plural[r.kind]}`));
    expect([...granted(account)].sort()).toEqual(
      watched.flatMap((w) => ["get", "list", "watch"].map((v) => `${w}:${v}`)).sort(),
    );
    // The Endpoints fallback is for old clusters only; ApiServerSource watches the current API.
    // Status subresources are written, not watched.
    expect(new Set(watched)).toEqual(
      new Set([...calls].map((c) => c.split(":")[0]!).filter((r) => r !== "/endpoints" && !r.endsWith("/status"))),
    );
  });

  it("gives the agent and the dead-letter sink no API access and no token", () => {
    for (const account of ["agent", "dead-letter"]) {
      expect(granted(account).size, account).toBe(0);
      expect(
        (findObject(OBJECTS, "ServiceAccount", account) as K8sObject & { automountServiceAccountToken?: boolean })
          .automountServiceAccountToken,
      ).toBe(false);
    }
  });
});
