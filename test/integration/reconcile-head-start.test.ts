import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import type { Notifier, NotifyPayload } from "../../shared/adapters/notifier.js";
import { createMemoryBlobStore, type StoredBlob } from "../../shared/adapters/memory-blob-store.js";
import { createStore, type ObjectStore } from "../../shared/adapters/store.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { HELD_ONLY } from "../../shared/app/head-start.js";
import { createReconciler, type ReconcileDeps, type Reconciler } from "../../shared/app/reconcile.js";
import { readLiveSnapshot } from "../../shared/adapters/snapshot-source.js";
import type { KubeObject, RequestInfo } from "../../shared/dev/kube-api-emulator.js";
import { service, slice } from "../support/fixtures.js";
import { TestKubeApi } from "../support/kube-api.js";

// A warm instance's head start (shared/app/reconcile.ts): the objects an event names are read
// again from the API server and laid over the instance's last list, and that config is published
// before the full list of the same pass. Real client reads against the Kubernetes API emulator; the
// store is the in-memory one with S3's semantics (the S3 adapter has tests of its own), one bucket
// that every instance and view of the file shares.

const BUCKET = "servicelb-test";
let objects: Map<string, StoredBlob>;
let api: TestKubeApi;
let dir: string;
let kubeconfig: string;
let prefixes = 0;
const opened: Array<{ close(): void }> = [];

beforeAll(async () => {
  objects = new Map();
  dir = await mkdtemp(join(tmpdir(), "servicelb-head-start-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  api = await new TestKubeApi().start();
  kubeconfig = await api.writeKubeconfig({ dir: await mkdtemp(join(dir, "kube-")) });
  api.upsert("Service", webService() as unknown as KubeObject);
  api.upsert("EndpointSlice", webSlice(["10.1.0.1", "10.1.0.2"]));
});
afterEach(async () => {
  for (const o of opened.splice(0)) o.close();
  await api.stop();
});

const webService = (labels?: Record<string, string>) =>
  service("web", [{ name: "http", port: 80, targetPort: 8080 }], { labels, selector: { app: "web" } });
const webSlice = (ips: string[], name = "web-a") =>
  slice("web", [{ name: "http", port: 8080 }], ips, { name }) as unknown as KubeObject;

/** A CloudEvent as Knative's ApiServerSource sends it (resource mode: data is the whole object). */
function event(verb: "add" | "update" | "delete", obj: object, id = "e") {
  return { specversion: "1.0", id, type: `dev.knative.apiserver.resource.${verb}`, source: "https://kube", data: obj };
}

interface Instance {
  reconciler: Reconciler;
  pings: NotifyPayload[];
}

/** A function instance on its own (its own caches), publishing under the test's prefix. */
function instance(prefix: string, env: Record<string, string> = {}, deps: Partial<ReconcileDeps> = {}): Instance {
  const pings: NotifyPayload[] = [];
  const notifier: Notifier = {
    discover: async () => ({ agents: ["http://agent"] }),
    notify: async (payload) => {
      pings.push(payload);
      return { agents: 1, ok: 1, failed: 0, results: [] } as unknown as Awaited<ReturnType<Notifier["notify"]>>;
    },
  };
  const settings = loadFunctionSettings({
    SERVICELB_STORE: `s3://${BUCKET}/${prefix}`,
    SERVICELB_KUBECONFIG: kubeconfig,
    ...env,
  });
  // Its own store over the shared bucket, closed with the reconciler.
  const store = createStore(createMemoryBlobStore({ bucket: BUCKET, prefix, objects }));
  const reconciler = createReconciler(settings, {
    log: createLogger("head-start-test", "silent"),
    store,
    notifier,
    ...deps,
  });
  opened.push(reconciler);
  return { reconciler, pings };
}

function storeView(prefix: string): ObjectStore {
  const store = createStore(createMemoryBlobStore({ bucket: BUCKET, prefix, objects }));
  opened.push(store);
  return store;
}

async function newestConfig(store: ObjectStore): Promise<string> {
  const latest = await store.latest();
  return latest ? (await store.get(latest.key)).config : "";
}

/** Polls the newest config until `ready` holds or `ms` pass; returns the last config read. */
async function configWhen(store: ObjectStore, ready: (config: string) => boolean, ms: number): Promise<string> {
  const deadline = Date.now() + ms;
  let config = await newestConfig(store);
  while (!ready(config) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    config = await newestConfig(store);
  }
  return config;
}

/** The full list of EndpointSlices (every namespace, no selector): what a head start runs before. */
const fullSliceList = (r: RequestInfo) =>
  r.method === "GET" && r.path === "/apis/discovery.k8s.io/v1/endpointslices" && r.query.watch === undefined;
/** A read of one named object. */
const namedRead = (r: RequestInfo) => r.method === "GET" && /\/(services|endpointslices)\/[^/]+$/.test(r.path);

describe("a warm instance's head start", () => {
  let prefix: string;
  beforeEach(() => {
    prefix = `hs${++prefixes}/`;
  });

  it("publishes an endpoint change before the full list of the cluster answers", async () => {
    const { reconciler, pings } = instance(prefix);
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const store = storeView(prefix);

    const changed = api.upsert("EndpointSlice", webSlice(["10.1.0.9", "10.1.0.2"]));
    api.delay({ ms: 3000, match: fullSliceList, times: 1 });
    let passDone = false;
    const pass = reconciler.reconcile(event("update", changed)).finally(() => {
      passDone = true;
    });
    await configWhen(store, (c) => c.includes("10.1.0.9:8080"), 2500);
    // Published and pinged while the full list is still held by the API server.
    expect(await newestConfig(store)).toContain("10.1.0.9:8080");
    expect(passDone).toBe(false);
    expect(pings.at(-1)?.key).toBe((await store.latest())!.key);

    const result = await pass;
    expect(result.headStart).toMatchObject({ status: "published", objects: 1 });
    // The full list found the same bytes: one config, one ping, and the pass says it published.
    expect(result).toMatchObject({ status: "published", key: result.headStart!.key });
    expect(pings.filter((p) => p.key === result.key)).toHaveLength(1);
  });

  it("does not wait for a full list already on its way: the next event's change is published meanwhile", async () => {
    const { reconciler } = instance(prefix);
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const store = storeView(prefix);

    const first = api.upsert("EndpointSlice", webSlice(["10.1.0.9", "10.1.0.2"]));
    const { held, release } = api.hold(fullSliceList);
    let firstDone = false;
    const one = reconciler.reconcile(event("update", first, "one")).finally(() => {
      firstDone = true;
    });
    try {
      await configWhen(store, (c) => c.includes("10.1.0.9:8080"), 2500);
      await held;
      // The first event's full list is held; the second event joins the pass after it, is answered
      // at once, and its change must not wait for that list either.
      api.upsert("EndpointSlice", webSlice(["10.1.0.7"], "web-b"));
      const two = await reconciler.reconcile(event("add", webSlice(["10.1.0.7"], "web-b"), "two"));
      expect(two.status).toBe("joined");
      await configWhen(store, (c) => c.includes("10.1.0.7:8080"), 2500);
      const config = await newestConfig(store);
      expect(config).toContain("10.1.0.7:8080");
      expect(config).toContain("10.1.0.9:8080");
      expect(firstDone).toBe(false);
    } finally {
      release();
    }

    expect((await one).headStart?.status).toBe("published");
    await reconciler.idle();
    // And the passes that followed kept both.
    expect(await newestConfig(store)).toContain("10.1.0.7:8080");
    expect(await newestConfig(store)).toContain("10.1.0.9:8080");
  });

  it("confirms a burst of events its head starts served with one full list", async () => {
    const { reconciler } = instance(prefix, { SERVICELB_CONFIRM_DELAY_MS: "300" });
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const lists = () => api.requests.filter(fullSliceList).length;
    const before = lists();
    const passes: Array<Promise<unknown>> = [];
    for (let i = 1; i <= 5; i++) {
      const changed = api.upsert("EndpointSlice", webSlice([`10.1.0.${10 + i}`, "10.1.0.2"]));
      passes.push(reconciler.reconcile(event("update", changed, `burst-${i}`)));
      await new Promise((r) => setTimeout(r, 30));
    }
    const results = (await Promise.all(passes)) as Array<{ status: string; headStart?: { status: string } }>;
    expect(results[0]?.headStart?.status).toBe("published");
    // The others arrived while the first one's work was under way: they joined it, answered at once.
    expect(results.slice(1).map((r) => r.status)).toEqual(Array(4).fill("joined"));
    await reconciler.idle();
    expect(lists() - before).toBe(1);
    expect(await newestConfig(storeView(prefix))).toContain("10.1.0.15:8080");
  });

  it("reads the object from the API server, never from the event: a forged event changes nothing", async () => {
    const { reconciler } = instance(prefix);
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const store = storeView(prefix);
    const before = (await store.latest())!.key;

    const forged = webSlice(["6.6.6.6"]) as unknown as { metadata: Record<string, unknown> };
    forged.metadata.resourceVersion = "99999999";
    const result = await reconciler.reconcile(event("update", forged));
    expect(result.headStart?.status).toBe("unchanged");
    expect(result.status).toBe("unchanged");
    expect((await store.latest())!.key).toBe(before);
    expect(await newestConfig(store)).not.toContain("6.6.6.6");

    // A forged object the API server does not have reads as gone: nothing to lay over.
    const nowhere = webSlice(["6.6.6.7"], "web-forged");
    expect((await reconciler.reconcile(event("add", nowhere))).headStart?.status).toBe("unchanged");
    expect(await newestConfig(store)).not.toContain("6.6.6.7");
  });

  it("takes an object the API server no longer has out of the config", async () => {
    api.upsert("EndpointSlice", webSlice(["10.1.0.7"], "web-b"));
    const { reconciler } = instance(prefix);
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const store = storeView(prefix);
    expect(await newestConfig(store)).toContain("10.1.0.7:8080");

    const gone = api.upsert("EndpointSlice", webSlice(["10.1.0.7"], "web-b"));
    api.remove("EndpointSlice", "default", "web-b");
    api.delay({ ms: 3000, match: fullSliceList, times: 1 });
    const pass = reconciler.reconcile(event("delete", gone));
    await configWhen(store, (c) => !c.includes("10.1.0.7:8080"), 2500);
    expect(await newestConfig(store)).not.toContain("10.1.0.7:8080");
    expect((await pass).headStart?.status).toBe("published");
  });

  it("publishes a new Service with its EndpointSlice from the Service's own event", async () => {
    const { reconciler } = instance(prefix);
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const shop = api.upsert(
      "Service",
      service("shop", [{ name: "http", port: 80, targetPort: 8080 }], {
        selector: { app: "shop" },
      }) as unknown as KubeObject,
    );
    api.upsert(
      "EndpointSlice",
      slice("shop", [{ name: "http", port: 8080 }], ["10.2.0.1"], { name: "shop-a" }) as unknown as KubeObject,
    );
    const result = await reconciler.reconcile(event("add", shop));
    expect(result.headStart).toMatchObject({ status: "published" });
    expect(result.held).toBeUndefined();
    expect((await storeView(prefix).get(result.headStart!.key!)).config).toContain("10.2.0.1:8080");
  });

  it("asks the store nothing for a new Service's own event before its slices: the Service is held back, the bytes are the newest's", async () => {
    const base = storeView(prefix);
    const headStartPublishes: string[] = [];
    const store: ObjectStore = {
      ...base,
      publish: (input) => {
        // A head start publishes only over the newest config it knows; a full pass does not say.
        if (input.expectedNewest !== undefined) headStartPublishes.push(input.revision);
        return base.publish(input);
      },
    };
    const { reconciler, pings } = instance(prefix, {}, { store });
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const newestBefore = (await base.latest())!.key;
    const shop = api.upsert(
      "Service",
      service("shop", [{ name: "http", port: 80, targetPort: 8080 }], {
        selector: { app: "shop" },
      }) as unknown as KubeObject,
    );
    const result = await reconciler.reconcile(event("add", shop));
    // Nothing rendered either: the head start of the slices' event would wait behind it.
    expect(result.headStart).toMatchObject({
      status: "unchanged",
      key: newestBefore,
      held: ["default/shop"],
      reason: HELD_ONLY,
    });
    expect(headStartPublishes).toEqual([]);
    // The full pass behind it recorded the Service's revision as a view.
    expect(result.view).toMatch(new RegExp(`views/\\d{6}-0*${shop.metadata.resourceVersion}$`));
    expect((await base.latest())!.key).toBe(newestBefore);
    expect(pings.filter((p) => p.key !== newestBefore)).toEqual([]);

    // Its slice's event: the head start publishes the Service with it.
    const shopSlice = api.upsert(
      "EndpointSlice",
      slice("shop", [{ name: "http", port: 8080 }], ["10.2.0.1"], { name: "shop-a" }) as unknown as KubeObject,
    );
    const added = await reconciler.reconcile(event("add", shopSlice));
    expect(added.headStart).toMatchObject({ status: "published" });
    expect(headStartPublishes).toEqual([shopSlice.metadata.resourceVersion]);
    expect((await base.get(added.headStart!.key!)).config).toContain("10.2.0.1:8080");
  });

  it("renders a head start that read a new Service beside another change: only the Service waits", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = pino(
      { level: "info" },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString("utf8")));
          done();
        },
      }),
    );
    const { reconciler } = instance(prefix, {}, { log });
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    // The first event's read is held, so that the next two events' objects are read together.
    const first = api.upsert("EndpointSlice", webSlice(["10.1.0.5", "10.1.0.2"]));
    api.delay({ ms: 300, match: namedRead, times: 1 });
    const one = reconciler.reconcile(event("update", first, "one"));
    try {
      await new Promise((r) => setTimeout(r, 50));
      const shop = api.upsert(
        "Service",
        service("shop", [{ name: "http", port: 80, targetPort: 8080 }], {
          selector: { app: "shop" },
        }) as unknown as KubeObject,
      );
      // Another slice: the held read of the first one returns what the API server has by then.
      const moved = api.upsert("EndpointSlice", webSlice(["10.1.0.6"], "web-b"));
      const [two, three] = await Promise.all([
        reconciler.reconcile(event("add", shop, "two")),
        reconciler.reconcile(event("add", moved, "three")),
      ]);
      // Both arrived while the first event's head start was under way: they joined, answered at once.
      expect([two.status, three.status]).toEqual(["joined", "joined"]);
      await reconciler.idle();
      const both = lines.filter((l) => l.msg === "head start: published" && l.objects === 2);
      expect(both).toHaveLength(1);
      expect(both[0]!.reason).toBeUndefined();
      const config = (await storeView(prefix).get(both[0]!.key as string)).config;
      expect(config).toContain("10.1.0.6:8080");
      expect(config).not.toContain("shop");
    } finally {
      await one;
    }
  });

  it("takes a Service that stopped matching --selector out of the config", async () => {
    api.upsert("Service", webService({ expose: "yes" }) as unknown as KubeObject);
    const { reconciler } = instance(prefix, { SERVICELB_SELECTOR: "expose=yes" });
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const store = storeView(prefix);
    expect(await newestConfig(store)).toContain("10.1.0.1:8080");

    const relabelled = api.upsert("Service", webService({ expose: "no" }) as unknown as KubeObject);
    const result = await reconciler.reconcile(event("update", relabelled));
    expect(result.headStart?.status).toBe("published");
    expect((await store.get(result.headStart!.key!)).config).not.toContain("10.1.0.1:8080");
  });

  it("writes nothing when another instance published since its list, and the full list publishes both changes", async () => {
    const a = instance(prefix);
    const b = instance(prefix);
    await a.reconciler.reconcileNow({ id: "warm-a", type: "test" });
    await b.reconciler.reconcileNow({ id: "warm-b", type: "test" });

    api.upsert("EndpointSlice", webSlice(["10.1.0.7"], "web-b"));
    const first = await b.reconciler.reconcile(event("add", webSlice(["10.1.0.7"], "web-b")));
    expect(first.headStart?.status).toBe("published");

    // Instance a's last list predates b's publish: laying a read over it would take 10.1.0.7 away.
    const changed = api.upsert("EndpointSlice", webSlice(["10.1.0.9", "10.1.0.2"]));
    const second = await a.reconciler.reconcile(event("update", changed));
    expect(second.headStart?.status).toBe("stale");
    expect(second.status).toBe("published");
    const config = await newestConfig(storeView(prefix));
    expect(config).toContain("10.1.0.7:8080");
    expect(config).toContain("10.1.0.9:8080");
  });

  it("publishes at the revision of the change it read: another instance's older list cannot take the change back", async () => {
    const a = instance(prefix, { SERVICELB_CONFIRM_DELAY_MS: "2000" });
    await a.reconciler.reconcileNow({ id: "warm-a", type: "test" });
    // Another instance listed here, after a change whose event went to it, and publishes late.
    api.upsert("EndpointSlice", webSlice(["10.1.0.7"], "web-b"));
    const older = await readLiveSnapshot({}, { kubeconfig });
    const b = instance(prefix, {}, { readSnapshot: async () => older });

    const changed = api.upsert("EndpointSlice", webSlice(["10.1.0.9", "10.1.0.2"]));
    const store = storeView(prefix);
    const pass = a.reconciler.reconcile(event("update", changed));
    await configWhen(store, (c) => c.includes("10.1.0.9:8080"), 1500);
    expect((await store.latest())!.revision).toBe(changed.metadata.resourceVersion);

    // Its list is older than the change the head start published: it must not win.
    expect((await b.reconciler.reconcileNow({ id: "late-b", type: "test" })).status).toBe("stale");
    expect(await newestConfig(store)).toContain("10.1.0.9:8080");
    // The full list behind the head start brings the other instance's change too.
    expect((await pass).status).toBe("published");
    const config = await newestConfig(store);
    expect(config).toContain("10.1.0.9:8080");
    expect(config).toContain("10.1.0.7:8080");
  });

  it.each([
    {
      what: "a read fails",
      fault: () => api.failNext({ status: 500, match: namedRead }),
      reason: "500",
    },
    {
      what: "RBAC grants no get (an old ClusterRole)",
      fault: () => api.forbid("endpointslices", ["get"]),
      reason: 'grant "get"',
    },
  ])("leaves the decision to the full list when $what, and says why", async ({ fault, reason }) => {
    const { reconciler } = instance(prefix);
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    fault();
    const changed = api.upsert("EndpointSlice", webSlice(["10.1.0.9", "10.1.0.2"]));
    const result = await reconciler.reconcile(event("update", changed));
    expect(result.headStart).toMatchObject({ status: "failed", reason: expect.stringContaining(reason) });
    expect(result.status).toBe("published");
    expect(await newestConfig(storeView(prefix))).toContain("10.1.0.9:8080");
  });

  it("is not tried by a cold instance, nor for a resync", async () => {
    const { reconciler } = instance(prefix);
    const cold = await reconciler.reconcile(event("update", webSlice(["10.1.0.1", "10.1.0.2"])));
    expect(cold.headStart).toMatchObject({ status: "skipped", reason: "no full list on this instance yet" });
    expect(cold.status).toBe("published");
    const resync = await reconciler.reconcileNow({ id: "resync", type: "test" });
    expect(resync.headStart).toBeUndefined();
    expect(api.requests.filter(namedRead)).toHaveLength(0);
  });
});
