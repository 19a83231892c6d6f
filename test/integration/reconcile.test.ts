import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { DeleteObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import * as functions from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import { CloudEvent, HTTP } from "cloudevents";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Notifier } from "../../shared/adapters/notifier.js";
import { createObjectStore, type ObjectStore } from "../../shared/adapters/store.js";
import { readLiveSnapshot } from "../../shared/adapters/snapshot-source.js";
import { loadFunctionSettings, type FunctionSettings } from "../../shared/app/function-options.js";
import { tracedReconciler } from "../../shared/app/pass-trace.js";
import type { LiveSnapshot } from "../../shared/app/pass-steps.js";
import {
  createReconcileHandler,
  createReconciler,
  type ReconcileDeps,
  type Reconciler,
} from "../../shared/app/reconcile.js";
import type { StageTrace } from "../../shared/adapters/stage-trace.js";
import { RenderContext } from "../../shared/app/render-context.js";
import { configDescriptors } from "../../shared/core/model/descriptors.js";
import type { KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { loadKubeConfig } from "../../shared/adapters/kube-config.js";
import { startEventBridge } from "../../shared/dev/event-bridge.js";
import { TestKubeApi } from "../support/kube-api.js";
import { agentReport, service, slice } from "../support/fixtures.js";
import { dripProxy } from "../support/drip.js";
import { countingProxy, waitFor } from "../support/net.js";
import { deadEndpoint, hangingEndpoint, S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

// The reconcile function end to end over HTTP, as the Broker would call it: real CloudEvents
// (made by the cloudevents SDK) into functions-framework, the real client-node against the
// Kubernetes protocol fake, s3rver as the store, and small HTTP servers standing in for agents.

const API_SERVER_SOURCE = "https://10.96.0.1:443";

interface AgentCall {
  path: string;
  authorization: string | undefined;
  body: { key: string; sha256: string; revision: string };
}

interface Agent {
  url: string;
  port: number;
  calls: AgentCall[];
  close(): Promise<void>;
}

async function startAgent(): Promise<Agent> {
  const calls: AgentCall[] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (text += c));
    req.on("end", () => {
      calls.push({
        path: req.url ?? "",
        authorization: (req.headers as IncomingHttpHeaders).authorization,
        body: JSON.parse(text),
      });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The EndpointSlice of the agent Service that lists one agent (one slice per port). */
function agentSlice(agent: { port: number }, name: string, portName = "agent"): KubeObject {
  return slice("agent", [{ name: portName, port: agent.port }], ["127.0.0.1"], {
    namespace: "servicelb",
    name,
  }) as unknown as KubeObject;
}

function apiServerEvent(
  mode: "resource" | "ref",
  verb: "add" | "update" | "delete",
  obj: Record<string, unknown>,
): CloudEvent<unknown> {
  const meta = obj.metadata as { name: string; namespace: string };
  const kind = obj.kind as string;
  const apiVersion = obj.apiVersion as string;
  const resource = kind === "EndpointSlice" ? "endpointslices" : `${kind.toLowerCase()}s`;
  return new CloudEvent<unknown>({
    type: `dev.knative.apiserver.${mode}.${verb}`,
    source: API_SERVER_SOURCE,
    subject: `/apis/${apiVersion}/namespaces/${meta.namespace}/${resource}/${meta.name}`,
    datacontenttype: "application/json",
    kind,
    name: meta.name,
    namespace: meta.namespace,
    data: mode === "resource" ? obj : { kind, namespace: meta.namespace, name: meta.name, apiVersion },
  });
}

function pingEvent(): CloudEvent<unknown> {
  return new CloudEvent<unknown>({
    type: "dev.knative.sources.ping",
    source: "/apis/v1/namespaces/servicelb/pingsources/resync",
    datacontenttype: "application/json",
    data: { reason: "resync" },
  });
}

function memoryLog() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: "debug" }, stream), lines };
}

let s3: TestS3;
let api: TestKubeApi;
let kubeconfig: string;
let dir: string;
let tokenFile: string;
let agents: Agent[];
let prefixCounter = 0;
const opened: Array<{ reconciler: Reconciler; server: Server }> = [];
const stores: ObjectStore[] = [];

beforeAll(async () => {
  s3 = await startS3();
  // The reconciler's store uses the standard AWS credential chain, as it would when deployed.
  vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
  dir = await mkdtemp(join(tmpdir(), "servicelb-reconcile-"));
  tokenFile = join(dir, "notify-token");
  await writeFile(tokenFile, "token-one\n");
});

afterAll(async () => {
  vi.unstubAllEnvs();
  await s3.stop();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(async () => {
  api = await new TestKubeApi().start();
  kubeconfig = await api.writeKubeconfig({ dir: await mkdtemp(join(dir, "kube-")) });
  api.upsert("Service", service("web", [{ name: "http", port: 80, targetPort: 8080 }]) as unknown as KubeObject);
  api.upsert(
    "EndpointSlice",
    slice("web", [{ name: "http", port: 8080 }], ["10.1.0.1", "10.1.0.2"], { name: "web-a" }) as unknown as KubeObject,
  );
  agents = [await startAgent(), await startAgent(), await startAgent()];
  // Two agents behind the agent Service, one in the static list.
  api.upsert("EndpointSlice", agentSlice(agents[0]!, "agent-a"));
  api.upsert("EndpointSlice", agentSlice(agents[1]!, "agent-b"));
  // A slice port with another name is not the agents' notify port.
  api.upsert("EndpointSlice", agentSlice({ port: 9 }, "agent-metrics", "metrics"));
});

afterEach(async () => {
  vi.restoreAllMocks();
  for (const { reconciler, server } of opened.splice(0)) {
    await reconciler.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  for (const store of stores.splice(0)) store.close();
  for (const agent of agents) await agent.close();
  await api.stop();
});

interface Harness {
  settings: FunctionSettings;
  reconciler: Reconciler;
  lines: Array<Record<string, unknown>>;
  /** An independent view of the same bucket and prefix. */
  store: ObjectStore;
  prefix: string;
  /** Where functions-framework serves the function. */
  url: string;
  send(event: CloudEvent<unknown>, mode?: "binary" | "structured"): Promise<{ status: number; body: string }>;
  /** The config objects under the prefix. */
  objects(): Promise<string[]>;
}

/** Settings from SERVICELB_* variables, the function registered and served by functions-framework. */
/** `trace`: wired as the reconcile function's entry point wires the stage trace (app/pass-trace.ts). */
async function harness(
  env: Record<string, string> = {},
  { trace, ...deps }: Partial<ReconcileDeps> & { trace?: StageTrace } = {},
): Promise<Harness> {
  prefixCounter += 1;
  const prefix = `t${prefixCounter}/`;
  const settings = loadFunctionSettings({
    SERVICELB_STORE: `s3://${s3.bucket}/${prefix}`,
    SERVICELB_STORE_ENDPOINT: s3.endpoint,
    SERVICELB_STORE_PATH_STYLE: "true",
    SERVICELB_KUBECONFIG: kubeconfig,
    SERVICELB_AGENT_SERVICE: "servicelb/agent",
    SERVICELB_AGENTS: agents[2]!.url,
    SERVICELB_NOTIFY_TOKEN_FILE: tokenFile,
    SERVICELB_NOTIFY_TIMEOUT_MS: "500",
    ...env,
  });
  const { log, lines } = memoryLog();
  const reconciler = trace
    ? tracedReconciler(settings, { log, ...deps }, trace)
    : createReconciler(settings, { log, ...deps });
  functions.cloudEvent("reconcile", createReconcileHandler(reconciler));
  const server = getTestServer("reconcile");
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  opened.push({ reconciler, server });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const store = createObjectStore({
    url: `s3://${s3.bucket}/${prefix}`,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
  });
  stores.push(store);
  return {
    settings,
    reconciler,
    lines,
    store,
    prefix,
    url,
    async send(event, mode = "binary") {
      const message = mode === "binary" ? HTTP.binary(event) : HTTP.structured(event);
      const res = await fetch(url, {
        method: "POST",
        headers: message.headers as Record<string, string>,
        body: message.body as string,
      });
      return { status: res.status, body: await res.text() };
    },
    async objects() {
      const page = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `${prefix}configs/` }));
      return (page.Contents ?? []).map((o) => o.Key!).sort();
    },
  };
}

const pings = () => agents.map((a) => a.calls.length);
const reconciled = (lines: Array<Record<string, unknown>>) =>
  lines.filter((l) => typeof l.msg === "string" && l.msg.startsWith("reconciled:"));
const webService = () => service("web", [{ name: "http", port: 80, targetPort: 8080 }]);
/** A warm instance's head starts that published (shared/app/reconcile.ts). */
const headStarts = (lines: Array<Record<string, unknown>>) => lines.filter((l) => l.msg === "head start: published");

describe("reconcile function", () => {
  it("publishes the config on an add event (binary mode) and pings every agent with key, sha256 and the bearer token", async () => {
    const h = await harness();
    const event = apiServerEvent("resource", "add", webService());
    const res = await h.send(event, "binary");
    // An empty 2xx: the Broker treats any other reply body as a failed delivery.
    expect(res).toEqual({ status: 204, body: "" });

    const latest = await h.store.latest();
    expect(latest).not.toBeNull();
    expect(latest!.revision).toBe(api.resourceVersion);
    expect(latest!.generator).toMatch(/^servicelb\/\d+\.\d+\.\d+/);
    expect(await h.objects()).toEqual([latest!.key]);
    for (const agent of agents) {
      expect(agent.calls).toEqual([
        {
          path: "/notify",
          authorization: "Bearer token-one",
          body: { key: latest!.key, sha256: latest!.sha256, revision: latest!.revision },
        },
      ]);
    }

    const [line] = reconciled(h.lines);
    expect(line).toMatchObject({
      eventId: event.id,
      eventType: "dev.knative.apiserver.resource.add",
      verdict: "relevant",
      status: "published",
      revision: latest!.revision,
      key: latest!.key,
      sha256: latest!.sha256,
      counts: { services: 1, backends: 1, servers: 2 },
      notify: { agents: 3, ok: 3, failed: 0 },
    });
    expect(Object.keys(line!.durationsMs as object).sort()).toEqual(["build", "list", "notify", "publish", "render"]);
  });

  it("reports each stage of a pass to the stage trace wrapped around it, in order", async () => {
    const events: Array<{ event: string; fields: Record<string, unknown> | undefined }> = [];
    const h = await harness({}, { trace: (event, fields) => events.push({ event, fields }) });
    expect((await h.send(apiServerEvent("resource", "add", webService()), "binary")).status).toBe(204);
    const latest = await h.store.latest();
    expect(events.map((e) => e.event)).toEqual([
      "event",
      "pass.start",
      "pass.listed",
      "pass.rendered",
      "pass.published",
      "pass.notified",
      "pass.end",
    ]);
    expect(events.find((e) => e.event === "pass.published")!.fields).toMatchObject({ key: latest!.key });
    expect(events.find((e) => e.event === "pass.rendered")!.fields).toMatchObject({
      buildMs: expect.any(Number),
      renderMs: expect.any(Number),
    });
  });

  it("writes nothing and pings nobody when the cluster has not changed (ref event in structured mode, then a resync)", async () => {
    const h = await harness();
    expect((await h.send(pingEvent())).status).toBe(204);
    const before = await h.objects();
    expect(before).toHaveLength(1);
    expect(pings()).toEqual([1, 1, 1]);

    expect((await h.send(apiServerEvent("ref", "update", webService()), "structured")).status).toBe(204);
    expect((await h.send(pingEvent(), "structured")).status).toBe(204);
    expect(await h.objects()).toEqual(before);
    expect(pings()).toEqual([1, 1, 1]);
    expect(reconciled(h.lines).map((l) => l.status)).toEqual(["published", "unchanged", "unchanged"]);
  });

  it("publishes a change under a newer key and reads a rotated token", async () => {
    const h = await harness();
    await h.send(pingEvent());
    const first = (await h.store.latest())!;
    await writeFile(tokenFile, "token-two\n");
    try {
      const changed = api.upsert(
        "EndpointSlice",
        slice("web", [{ name: "http", port: 8080 }], ["10.1.0.3"], { name: "web-a" }) as unknown as KubeObject,
      );
      expect((await h.send(apiServerEvent("resource", "update", changed))).status).toBe(204);
      const second = (await h.store.latest())!;
      expect(second.key > first.key).toBe(true);
      // A warm instance's head start published it, at the revision of the change it read; the
      // full list that followed found the same bytes.
      expect(second.revision).toBe(changed.metadata.resourceVersion);
      expect(headStarts(h.lines)).toEqual([expect.objectContaining({ key: second.key, objects: 1 })]);
      expect(reconciled(h.lines).at(-1)).toMatchObject({ status: "unchanged", key: second.key });
      expect(agents[0]!.calls.map((c) => [c.body.key, c.authorization])).toEqual([
        [first.key, "Bearer token-one"],
        [second.key, "Bearer token-two"],
      ]);
    } finally {
      await writeFile(tokenFile, "token-one\n");
    }
  });

  it("prunes old configs past SERVICELB_STORE_RETAIN only after pinging the agents", async () => {
    const atPing: string[][] = [];
    let h!: Harness;
    const notifier: Notifier = {
      discover: async () => ({ agents: [] }),
      async notify() {
        atPing.push(await h.objects());
        return { agents: 0, ok: 0, failed: 0, unpinged: 0, failures: [] };
      },
    };
    h = await harness({ SERVICELB_STORE_RETAIN: "1" }, { notifier });
    const first = await h.reconciler.reconcileNow({ id: "one", type: "test" });
    api.upsert(
      "EndpointSlice",
      slice("web", [{ name: "http", port: 8080 }], ["10.1.0.3"], { name: "web-a" }) as unknown as KubeObject,
    );
    const second = await h.reconciler.reconcileNow({ id: "two", type: "test" });

    expect(first.pruned).toBeUndefined();
    expect(second.pruned).toBe(1);
    // The second ping went out while the first config was still there: the delete came after it.
    expect(atPing).toEqual([[first.key], [first.key, second.key]]);
    expect(await h.objects()).toEqual([second.key]);
  });

  it("keeps its connections to the API server and the store alive across passes", async () => {
    const apiProxy = await countingProxy(Number(new URL(api.url).port));
    const storeProxy = await countingProxy(Number(new URL(s3.endpoint).port));
    try {
      const viaProxy = join(dir, `kubeconfig-proxy-${prefixCounter}`);
      await writeFile(
        viaProxy,
        (await readFile(kubeconfig, "utf8")).replace(api.url, `http://127.0.0.1:${apiProxy.port}`),
      );
      const h = await harness({
        SERVICELB_KUBECONFIG: viaProxy,
        SERVICELB_STORE_ENDPOINT: `http://127.0.0.1:${storeProxy.port}`,
      });
      const passes = 6;
      for (let i = 0; i < passes; i++) {
        api.upsert(
          "EndpointSlice",
          slice("web", [{ name: "http", port: 8080 }], [`10.1.0.${10 + i}`], {
            name: "web-a",
          }) as unknown as KubeObject,
        );
        expect((await h.reconciler.reconcileNow({ id: `p${i}`, type: "test" })).status).toBe("published");
      }
      // Each pass makes 8 API calls (two lists side by side, the four Gateway API lists after the
      // second, the revision probe, the agents' slices) and 5-6 store calls, up to 3 at once: one
      // connection per call would be 48 and 30+. The store has two pools of its own: the SDK's
      // (configs, listings, writes) and the lean GET's (pin.json and the other records).
      expect(apiProxy.connections).toBeLessThanOrEqual(3);
      expect(storeProxy.connections).toBeLessThanOrEqual(6);
    } finally {
      await apiProxy.close();
      await storeProxy.close();
    }
  });

  describe("a new Service whose EndpointSlice has not arrived yet", () => {
    const shop = () =>
      service("shop", [{ name: "http", port: 80, targetPort: 8080 }], {
        selector: { app: "shop" },
      }) as unknown as KubeObject;
    const shopSlice = () =>
      slice("shop", [{ name: "http", port: 8080 }], ["10.2.0.1"], { name: "shop-a" }) as unknown as KubeObject;
    const newestConfig = async (h: Harness) => (await h.store.get((await h.store.latest())!.key)).config;
    /** The backend `/shop` routes to (a warm instance puts a new Service into a spare), or null. */
    const shopBackend = (config: string) => /^#\| \/shop\/ ([^|\s]+)/m.exec(config)?.[1] ?? null;

    it("is held back from its own event's pass, then published once, with its endpoints, by the slice's", async () => {
      const h = await harness();
      await h.send(pingEvent());
      const before = await h.objects();
      const pinged = pings();

      expect((await h.send(apiServerEvent("ref", "add", api.upsert("Service", shop())))).status).toBe(204);
      expect(reconciled(h.lines).at(-1)).toMatchObject({ msg: "reconciled: unchanged", held: ["default/shop"] });
      expect(await h.objects()).toEqual(before);
      expect(pings()).toEqual(pinged);

      await h.send(apiServerEvent("ref", "add", api.upsert("EndpointSlice", shopSlice())));
      // A warm instance: the slice's head start publishes it, and its full list confirms it.
      expect(headStarts(h.lines)).toEqual([expect.objectContaining({ key: (await h.store.latest())!.key })]);
      expect(reconciled(h.lines).at(-1)).toMatchObject({ msg: "reconciled: unchanged" });
      expect(reconciled(h.lines).at(-1)?.held).toBeUndefined();
      expect((await h.objects()).length).toBe(before.length + 1);
      const config = await newestConfig(h);
      const backend = shopBackend(config);
      expect(backend).not.toBeNull();
      expect(config).toMatch(new RegExp(`^backend ${backend} .*\\n(.*\\n)*?\\s+server s\\d+ 10\\.2\\.0\\.1:8080`, "m"));
    });

    it("is served, without endpoints, by the next resync when no slice comes", async () => {
      const h = await harness();
      await h.send(pingEvent());
      await h.send(apiServerEvent("ref", "add", api.upsert("Service", shop())));
      expect(shopBackend(await newestConfig(h))).toBeNull();

      await h.send(pingEvent());
      expect(reconciled(h.lines).at(-1)).toMatchObject({ msg: "reconciled: published" });
      expect(shopBackend(await newestConfig(h))).not.toBeNull();
      // Once rendered, it is never held back again.
      api.upsert("Service", {
        ...shop(),
        metadata: { ...shop().metadata, annotations: { "serviceloadbalancer/lb.algorithm": "leastconn" } },
      });
      await h.send(apiServerEvent("ref", "update", shop()));
      // The head start's own config serves it with the new setting: it was not held back.
      const [early] = headStarts(h.lines);
      const config = (await h.store.get(String(early?.key))).config;
      const backend = shopBackend(config);
      expect(backend).not.toBeNull();
      expect(config).toMatch(new RegExp(`^backend ${backend} .*\\n(.*\\n)*?\\s+balance leastconn`, "m"));
    });

    it("stays in its spare when a cold instance takes over: the layout is read back from the store", async () => {
      const h = await harness();
      await h.send(pingEvent());
      api.upsert("Service", shop());
      api.upsert("EndpointSlice", shopSlice());
      await h.send(pingEvent());
      const placed = await newestConfig(h);
      expect(shopBackend(placed)).toMatch(/^spare_\d+$/);

      const { log, lines } = memoryLog();
      const cold = createReconciler(h.settings, { log });
      try {
        const result = await cold.reconcileNow({ id: "cold", type: "test" });
        // The same bytes: nothing for the agents to do. Placed afresh, shop would move to a
        // backend of its own, which every node would have to reload for.
        expect(result.status).toBe("unchanged");
        expect(shopBackend(await newestConfig(h))).toBe(shopBackend(placed));
        expect(
          lines.some((l) => l.msg === "cannot read the newest config's backend layout; placing Services afresh"),
        ).toBe(false);
      } finally {
        cold.close();
      }
    });

    it("is published at once by a cold instance, which cannot tell it from one already served", async () => {
      const h = await harness();
      await h.send(apiServerEvent("ref", "add", api.upsert("Service", shop())));
      expect(reconciled(h.lines).at(-1)).toMatchObject({ msg: "reconciled: published" });
      expect(shopBackend(await newestConfig(h))).not.toBeNull();
    });
  });

  it("keeps the newer snapshot's config newest when an older invocation on another instance finishes last (invariant 1)", async () => {
    let olderListed!: () => void;
    const listed = new Promise<void>((resolve) => (olderListed = resolve));
    let releaseOlder!: () => void;
    const gate = new Promise<void>((resolve) => (releaseOlder = resolve));
    const mem = memoryLog();
    const h = await harness({}, { log: mem.log });
    // A second function instance (one instance runs one pass at a time): its list completes,
    // then it stalls until the first instance has published a newer snapshot.
    const slowInstance = createReconciler(h.settings, {
      log: mem.log,
      readSnapshot: async (): Promise<LiveSnapshot> => {
        const snapshot = await readLiveSnapshot(h.settings.options, { kubeconfig });
        olderListed();
        await gate;
        return snapshot;
      },
    });

    const older = slowInstance.reconcile(apiServerEvent("resource", "add", webService()));
    await listed;
    const olderRevision = api.resourceVersion;
    const changed = api.upsert(
      "Service",
      service("shop", [{ port: 80 }], { namespace: "shop" }) as unknown as KubeObject,
    );
    api.upsert(
      "EndpointSlice",
      slice("shop", [{ port: 80 }], ["10.2.0.1"], { namespace: "shop", name: "shop-a" }) as unknown as KubeObject,
    );
    expect((await h.send(apiServerEvent("resource", "add", changed))).status).toBe(204);
    const newer = (await h.store.latest())!;
    expect(BigInt(newer.revision) > BigInt(olderRevision)).toBe(true);

    releaseOlder();
    expect((await older).status).toBe("stale");
    slowInstance.close();
    expect((await h.store.latest())!.key).toBe(newer.key);
    expect(await h.objects()).toEqual([newer.key]);
    expect(pings()).toEqual([1, 1, 1]);
    expect(reconciled(mem.lines).map((l) => [l.status, l.revision])).toEqual([
      ["published", newer.revision],
      ["stale", olderRevision],
    ]);
  });

  it("coalesces a burst of events into at most two passes on one instance", async () => {
    const mem = memoryLog();
    const h = await harness({}, { log: mem.log });
    // Full lists of Services, not the one-item probe of the live revision a publish makes.
    const lists = () => api.requests.filter((r) => r.path.endsWith("/services") && r.query.limit !== "1").length;
    const before = lists();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => h.send(apiServerEvent("resource", "update", webService()))),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(204));
    // The events that joined a pass were answered before it ran.
    await h.reconciler.idle();
    const passes = reconciled(mem.lines);
    expect(passes.length).toBeGreaterThanOrEqual(1);
    expect(passes.length).toBeLessThanOrEqual(2);
    expect(lists() - before).toBe(passes.length);
    expect(await h.objects()).toHaveLength(1);
    expect(pings()).toEqual([1, 1, 1]);
  });

  it("answers the events that arrive while a pass is held at once, and runs exactly one pass after it for all of them", async () => {
    const mem = memoryLog();
    const h = await harness({}, { log: mem.log });
    const fullServiceList = (r: { path: string; query: Record<string, string> }) =>
      r.path.endsWith("/services") && r.query.limit !== "1";
    const { held, release } = api.hold(fullServiceList);
    let firstAnswered = false;
    const first = h.send(apiServerEvent("resource", "update", webService())).finally(() => {
      firstAnswered = true;
    });
    await held;
    try {
      const answers: Array<Promise<{ status: number }>> = [];
      for (let i = 1; i <= 8; i++) {
        const changed = api.upsert(
          "EndpointSlice",
          slice("web", [{ name: "http", port: 8080 }], [`10.1.0.${10 + i}`], {
            name: "web-a",
          }) as unknown as KubeObject,
        );
        answers.push(h.send(apiServerEvent("resource", "update", changed)));
      }
      // The pass is held until released: only an answer that does not wait for it can come.
      const all = Promise.all(answers);
      const answeredWhileHeld = await Promise.race([all, new Promise<undefined>((r) => setTimeout(r, 3000))]);
      expect(answeredWhileHeld?.map((a) => a.status)).toEqual(Array(8).fill(204));
      expect(firstAnswered).toBe(false);
    } finally {
      release();
    }
    expect((await first).status).toBe(204);
    await h.reconciler.idle();
    expect(api.requests.filter(fullServiceList)).toHaveLength(2);
    expect(reconciled(mem.lines)).toHaveLength(2);
    const newest = await h.store.get((await h.store.latest())!.key);
    expect(newest.config).toContain("10.1.0.18:8080");
    expect(newest.config).not.toMatch(/10\.1\.0\.1[1-7]:8080/);
  });

  it("answers a watch storm (an ADDED event per object, from the event bridge) while the first pass is held", async () => {
    const h = await harness();
    for (let i = 0; i < 100; i++) {
      api.upsert("Service", service(`s${i}`, [{ name: "http", port: 80, targetPort: 8080 }]) as unknown as KubeObject);
      api.upsert(
        "EndpointSlice",
        slice(`s${i}`, [{ name: "http", port: 8080 }], [`10.3.0.${i}`], { name: `s${i}-a` }) as unknown as KubeObject,
      );
    }
    // Not the bridge's watch of Services: the same path.
    const fullServiceList = (r: { path: string; query: Record<string, string> }) =>
      r.path.endsWith("/services") && r.query.limit !== "1" && r.query.watch === undefined;
    const { held, release } = api.hold(fullServiceList);
    const answers: number[] = [];
    const stop = startEventBridge({
      kc: loadKubeConfig({ kubeconfig }),
      sink: h.url,
      resyncMs: 3_600_000,
      concurrency: 16,
      log: memoryLog().log,
      trace: (ev, fields) => {
        if (ev === "delivered") answers.push(Number(fields?.status));
      },
    });
    try {
      await held;
      // An ADDED event for each of the 205 objects (web and its slice, the 3 agent slices, the
      // 100 Services and their slices) and the resync tick; one of them started the held pass.
      const events = 206;
      await waitFor("every event but the one whose pass is held to be answered", async () =>
        answers.length >= events - 1 ? true : undefined,
      );
      expect(answers.filter((s) => s === 204)).toHaveLength(events - 1);
    } finally {
      release();
      stop();
    }
    await waitFor("the pass's own event to be answered", async () => (answers.length === 206 ? true : undefined));
    expect(answers.every((s) => s === 204)).toBe(true);
    await h.reconciler.idle();
    expect((await h.store.get((await h.store.latest())!.key)).config).toContain("10.3.0.99:8080");
  });

  it("retries a failed pass that events answered at once were waiting for, and only that one", async () => {
    const mem = memoryLog();
    const h = await harness({}, { log: mem.log });
    const fullServiceList = (r: { path: string; query: Record<string, string> }) =>
      r.path.endsWith("/services") && r.query.limit !== "1";
    const retrying = () =>
      mem.lines.filter(
        (l) => l.msg === "a pass that events answered at once were waiting for failed: this instance retries it",
      );
    const { held, release } = api.hold(fullServiceList);
    const first = h.send(pingEvent());
    await held;
    expect((await h.send(apiServerEvent("resource", "update", webService()))).status).toBe(204);
    // The held pass goes through; the one after it, which the answered event waits for, fails at its list.
    api.failNext({
      status: 503,
      match: (r) => fullServiceList(r) && api.requests.filter(fullServiceList).length === 2,
    });
    release();
    expect((await first).status).toBe(204);
    await waitFor("the failed pass's retry to be planned", async () => (retrying().length > 0 ? true : undefined));
    // No event tells the instance about this change: only the retry's list can publish it.
    const moved = api.upsert(
      "EndpointSlice",
      slice("web", [{ name: "http", port: 8080 }], ["10.1.0.77"], { name: "web-a" }) as unknown as KubeObject,
    );
    await waitFor("the retry to publish", async () =>
      (await h.store.latest())?.revision === moved.metadata.resourceVersion ? true : undefined,
    );
    expect(retrying()).toHaveLength(1);
    // The first pass, the one that failed, its retry: no other.
    expect(api.requests.filter(fullServiceList)).toHaveLength(3);
  });

  it("publishes exactly what the dry run renders for the same cluster state", async () => {
    const h = await harness({ SERVICELB_HTTP_PORT: "8080", SERVICELB_BALANCE_ALGORITHM: "leastconn" });
    await h.send(pingEvent());
    const published = await h.store.get((await h.store.latest())!.key);
    const dryRun = new RenderContext(h.settings.options).render(
      await readLiveSnapshot(h.settings.options, { kubeconfig }),
    );
    expect(published.config).toBe(dryRun.config);
    expect(published.config).toContain("bind *:8080");
    expect(published.revision).toBe(dryRun.revision);
  });
});

describe("reconcile function faults", () => {
  it("refuses to start with agents configured but no notify token: every ping would be refused", () => {
    const settings = loadFunctionSettings({
      SERVICELB_STORE: `s3://${s3.bucket}/x/`,
      SERVICELB_STORE_ENDPOINT: s3.endpoint,
      SERVICELB_AGENTS: "http://127.0.0.1:9/",
    });
    expect(() => createReconciler(settings, { log: memoryLog().log })).toThrow(
      /SERVICELB_NOTIFY_TOKEN_FILE or SERVICELB_NOTIFY_TOKEN is required/,
    );
  });

  it("fails with 5xx and writes nothing when the API server answers 500", async () => {
    const h = await harness();
    vi.spyOn(console, "error").mockImplementation(() => {});
    api.failNext({ status: 500, times: 10 });
    const res = await h.send(pingEvent());
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(await h.objects()).toEqual([]);
    expect(pings()).toEqual([0, 0, 0]);
    expect(h.lines.find((l) => l.level === 40 && l.stage === "list")).toBeDefined();
  });

  it("fails with 5xx when the API server refuses connections", async () => {
    const h = await harness();
    vi.spyOn(console, "error").mockImplementation(() => {});
    await api.stop();
    const res = await h.send(pingEvent());
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(await h.objects()).toEqual([]);
    api = await new TestKubeApi().start(); // for afterEach
  });

  it("fails loudly (error log, 5xx) on a permanent failure such as a missing RBAC grant", async () => {
    const h = await harness();
    vi.spyOn(console, "error").mockImplementation(() => {});
    api.forbid("services");
    expect((await h.send(pingEvent())).status).toBe(500);
    const error = h.lines.find((l) => l.level === 50);
    expect(error).toMatchObject({ stage: "list" });
    expect(JSON.stringify(error)).toContain("RBAC");
    expect(await h.objects()).toEqual([]);
  });

  it("fails with 5xx and pings nobody when the object store is down", async () => {
    const h = await harness({ SERVICELB_STORE_ENDPOINT: deadEndpoint() });
    vi.spyOn(console, "error").mockImplementation(() => {});
    expect((await h.send(pingEvent())).status).toBe(500);
    expect(pings()).toEqual([0, 0, 0]);
    expect(h.lines.find((l) => l.level === 40 && l.stage === "publish")).toBeDefined();
  });

  it("still succeeds when agents are unreachable or hang, and pings the others", async () => {
    const hanging = await hangingEndpoint();
    try {
      const h = await harness({
        SERVICELB_AGENTS: `${agents[2]!.url},${deadEndpoint()},${hanging.endpoint}`,
        SERVICELB_NOTIFY_TIMEOUT_MS: "300",
      });
      expect((await h.send(pingEvent())).status).toBe(204);
      expect(pings()).toEqual([1, 1, 1]);
      expect(reconciled(h.lines)[0]).toMatchObject({ status: "published", notify: { agents: 5, ok: 3, failed: 2 } });
      const [warning] = h.lines.filter((l) => l.msg === "some agents were not pinged; they converge by their poll");
      const failed = (warning!.first as Array<{ error: string }>).map((p) => p.error).sort();
      expect(failed).toEqual([expect.stringContaining("ECONNREFUSED"), "timed out"]);
    } finally {
      await hanging.stop();
    }
  });

  it("still pings the static agents when the agent Service cannot be listed", async () => {
    // The cluster list needs EndpointSlices too: take the snapshot before they are forbidden.
    let live: LiveSnapshot | undefined;
    const h = await harness({}, { readSnapshot: async () => live! });
    live = await readLiveSnapshot(h.settings.options, { kubeconfig });
    api.forbid("endpointslices");
    expect((await h.send(pingEvent())).status).toBe(204);
    expect(pings()).toEqual([0, 0, 1]);
    expect(reconciled(h.lines)[0]).toMatchObject({ status: "published", notify: { agents: 1, ok: 1, failed: 0 } });
    expect(h.lines.find((l) => String(l.msg).startsWith("agent discovery failed"))).toMatchObject({
      err: expect.stringContaining("HTTP 403"),
    });
  });
});

describe("events that cannot change the config", () => {
  it("acknowledges unknown event types and malformed payloads without listing the cluster", async () => {
    const h = await harness();
    api.reset();
    const unknown = new CloudEvent<unknown>({ type: "com.example.something", source: "/x", data: {} });
    const noMetadata = new CloudEvent<unknown>({
      type: "dev.knative.apiserver.resource.add",
      source: API_SERVER_SOURCE,
      datacontenttype: "application/json",
      data: { kind: "Service" },
    });
    const notAnObject = new CloudEvent<unknown>({
      type: "dev.knative.apiserver.ref.update",
      source: API_SERVER_SOURCE,
      datacontenttype: "application/json",
      data: ["hello"],
    });
    for (const event of [unknown, noMetadata, notAnObject]) {
      expect((await h.send(event, "binary")).status).toBe(204);
      expect((await h.send(event, "structured")).status).toBe(204);
    }
    // Not a CloudEvent at all: a plain JSON POST.
    const url = `http://127.0.0.1:${(opened.at(-1)!.server.address() as AddressInfo).port}/`;
    expect(
      (await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"hello":1}' }))
        .status,
    ).toBe(204);

    expect(api.requests).toEqual([]);
    expect(await h.objects()).toEqual([]);
    const ignored = h.lines.filter((l) => l.msg === "event ignored: not understood");
    expect(ignored.map((l) => l.verdict)).toEqual([
      "unknown",
      "unknown",
      "malformed",
      "malformed",
      "malformed",
      "malformed",
      "malformed",
    ]);
  });

  it("leaves a body that is not JSON to functions-framework, whose 400 the Broker does not retry", async () => {
    const h = await harness();
    api.reset();
    const event = new CloudEvent<unknown>({
      type: "dev.knative.apiserver.resource.add",
      source: API_SERVER_SOURCE,
      datacontenttype: "application/json",
      data: "{not json",
    });
    // body-parser rejects it before the function runs; a 4xx other than 404/408/409/429 goes to the dead-letter sink.
    expect((await h.send(event, "binary")).status).toBe(400);
    expect(api.requests).toEqual([]);
  });

  it("acknowledges events about other kinds, kube-system and namespaces outside --namespace without listing", async () => {
    const h = await harness({ SERVICELB_NAMESPACE: "default" });
    api.reset();
    const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: "default" }, data: {} };
    const knativeService = {
      apiVersion: "serving.knative.dev/v1",
      kind: "Service",
      metadata: { name: "web", namespace: "default" },
    };
    const events = [
      apiServerEvent("resource", "add", configMap),
      apiServerEvent("resource", "update", knativeService),
      apiServerEvent("ref", "add", service("dns", [{ port: 53 }], { namespace: "kube-system" })),
      apiServerEvent("resource", "delete", service("shop", [{ port: 80 }], { namespace: "shop" })),
      apiServerEvent(
        "ref",
        "update",
        slice("shop", [{ port: 80 }], ["10.2.0.1"], { namespace: "shop", name: "shop-a" }),
      ),
    ];
    for (const event of events) expect((await h.send(event)).status).toBe(204);
    expect(api.requests).toEqual([]);
    expect(await h.objects()).toEqual([]);
    expect(h.lines.filter((l) => l.verdict === "irrelevant")).toHaveLength(events.length);

    // The same namespace in scope is relevant.
    expect((await h.send(apiServerEvent("ref", "update", webService()))).status).toBe(204);
    expect(api.requests.length).toBeGreaterThan(0);
    expect(await h.objects()).toHaveLength(1);
  });
});

describe("configs within the nodes' file descriptors", () => {
  const big = ["10.1.1.1", "10.1.1.2", "10.1.1.3", "10.1.1.4", "10.1.1.5"];
  const own = (h: Harness) => async (key: string) => configDescriptors((await h.store.get(key)).config).own;
  const roomRead = (h: Harness, room: number) =>
    waitFor(
      `the reports read, room ${room}`,
      async () =>
        h.lines.some((l) => l.room === room && String(l.msg).startsWith("the smallest node has room")) || undefined,
    );

  it("the layout starts afresh rather than keep a removed Service's backend the smallest node has no room for; a config over it anyway is a warning", async () => {
    // Servers cost descriptors when they are health-checked.
    const h = await harness({ SERVICELB_DIGEST: "sha256", SERVICELB_ACTIVE_CHECKS: "true" }, { digestRecheckMs: 0 });
    const descriptors = own(h);
    const before = await h.reconciler.reconcileNow({ id: "1", type: "resync" });
    // More endpoints than a spare has slots: a backend of its own.
    api.upsert("Service", service("big", [{ name: "http", port: 80, targetPort: 8080 }]) as unknown as KubeObject);
    api.upsert(
      "EndpointSlice",
      slice("big", [{ name: "http", port: 8080 }], big, { name: "big-a" }) as unknown as KubeObject,
    );
    const grown = await h.reconciler.reconcileNow({ id: "2", type: "resync" });
    const room = (await descriptors(grown.key!)) - 1;
    // The node's report: what it may open, less what HAProxy takes itself.
    await h.store.putStatus("node-a", {
      ...agentReport("node-a", ["sha256"]),
      openFiles: { limit: room + 228, reserved: 228 },
    });
    await h.reconciler.reconcileNow({ id: "3", type: "resync" });
    await roomRead(h, room);

    api.remove("Service", "default", "big");
    api.remove("EndpointSlice", "default", "big-a");
    const after = await h.reconciler.reconcileNow({ id: "4", type: "resync" });
    expect(after.status).toBe("published");
    expect((await h.store.get(after.key!)).config).not.toContain("backend default_big_80 ");
    expect(await descriptors(after.key!)).toBe(await descriptors(before.key!));
    expect(h.lines.some((l) => l.msg?.toString().startsWith("the config needs more file descriptors"))).toBe(false);

    await h.store.putStatus("node-a", {
      ...agentReport("node-a", ["sha256"]),
      openFiles: { limit: 300, reserved: 228 },
    });
    await h.reconciler.reconcileNow({ id: "5", type: "resync" });
    await roomRead(h, 72);
    await h.reconciler.reconcileNow({ id: "6", type: "resync" });
    expect(h.lines.find((l) => String(l.msg).startsWith("the config needs more file descriptors"))).toMatchObject({
      level: 40,
      descriptors: await descriptors(after.key!),
      room: 72,
    });
  });
});

describe("the digest configs are published by", () => {
  const report = agentReport;
  const moveTo = (ip: string) =>
    api.upsert(
      "EndpointSlice",
      slice("web", [{ name: "http", port: 8080 }], [ip], { name: "web-a" }) as unknown as KubeObject,
    );
  const pinged = () => agents[2]!.calls.at(-1)?.body.sha256;

  it("is sha256 while one agent's report lacks tree1, tree1 from the next change once every report lists it, and sha256 again (the same bytes republished) when an old agent reports", async () => {
    const h = await harness({}, { digestRecheckMs: 0 });
    // Three agents are pinged: each has a report, one of them an agent's from before tree1.
    await h.store.putStatus("node-a", report("node-a", ["sha256", "tree1"]));
    await h.store.putStatus("node-b", report("node-b", ["sha256", "tree1"]));
    await h.store.putStatus("node-old", report("node-old"));
    const first = await h.reconciler.reconcileNow({ id: "1", type: "resync" });
    expect(first).toMatchObject({ status: "published", sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(pinged()).toBe(first.sha256);

    await s3.client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: `${h.prefix}status/node-old.json` }));
    await h.store.putStatus("node-c", report("node-c", ["sha256", "tree1"]));
    // The reports are read again beside this pass (in the background: it does not wait); the
    // same bytes stay the config they are.
    expect(await h.reconciler.reconcileNow({ id: "2", type: "resync" })).toMatchObject({ status: "unchanged" });
    await waitFor(
      "the reports read again",
      async () =>
        h.lines.some((l) => l.msg === "every agent verifies tree1 digests: configs are published by tree1") ||
        undefined,
    );
    moveTo("10.1.0.9");
    const tree = await h.reconciler.reconcileNow({ id: "3", type: "resync" });
    expect(tree).toMatchObject({ status: "published", sha256: expect.stringMatching(/^tree1:[0-9a-f]{64}$/) });
    expect(pinged()).toBe(tree.sha256);
    expect(await h.store.get(tree.key!)).toMatchObject({ sha256: tree.sha256 });

    await h.store.putStatus("node-old", report("node-old"));
    // Nothing changed, but that agent cannot verify the newest config: the pass that reads its
    // report (on tree1 a due read is waited for) publishes the same bytes by sha256.
    const back = await h.reconciler.reconcileNow({ id: "4", type: "resync" });
    expect(back).toMatchObject({ status: "published", sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect((await h.store.get(back.key!)).config).toBe((await h.store.get(tree.key!)).config);
    expect(pinged()).toBe(back.sha256);
  });

  it("stays tree1 while a report cannot be read (503 after every retry), and goes back to sha256 when one read says no", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      proxy.refuseStatus = 503;
      const h = await harness({ SERVICELB_STORE_ENDPOINT: proxy.endpoint }, { digestRecheckMs: 0 });
      for (const node of ["node-a", "node-b", "node-c"])
        await h.store.putStatus(node, report(node, ["sha256", "tree1"]));
      const first = await h.reconciler.reconcileNow({ id: "1", type: "resync" });
      expect(first).toMatchObject({ status: "published", sha256: expect.stringMatching(/^tree1:[0-9a-f]{64}$/) });

      // node-b's report cannot be read: the read comes up short, and decides nothing.
      proxy.mode = (req) => (req.method === "GET" && req.url?.endsWith("/status/node-b.json") ? "refuse" : "pass");
      moveTo("10.1.0.7");
      const short = await h.reconciler.reconcileNow({ id: "2", type: "resync" });
      expect(short).toMatchObject({ status: "published", sha256: expect.stringMatching(/^tree1:[0-9a-f]{64}$/) });
      expect(h.lines.find((l) => String(l.msg).startsWith("some agents' reports cannot be read"))).toMatchObject({
        level: 40,
        unread: 1,
        records: 3,
      });
      expect(h.lines.some((l) => l.msg === "configs are published by sha256 digests")).toBe(false);

      // A report read that says its agent cannot verify tree1 decides, whatever was not read.
      await h.store.putStatus("node-old", report("node-old"));
      const back = await h.reconciler.reconcileNow({ id: "3", type: "resync" });
      expect(back).toMatchObject({ status: "published", sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
      expect(h.lines.find((l) => l.msg === "configs are published by sha256 digests")).toMatchObject({
        reason: "node node-old (servicelb/0.1.0) does not report that it verifies tree1",
      });
    } finally {
      await proxy.stop();
    }
  });

  it("is what SERVICELB_DIGEST names, whatever the reports say", async () => {
    const sha = await harness({ SERVICELB_DIGEST: "sha256" });
    await sha.store.putStatus("node-new", report("node-new", ["sha256", "tree1"]));
    expect(await sha.reconciler.reconcileNow({ id: "1", type: "resync" })).toMatchObject({
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const tree = await harness({ SERVICELB_DIGEST: "tree1" });
    expect(await tree.reconciler.reconcileNow({ id: "1", type: "resync" })).toMatchObject({
      sha256: expect.stringMatching(/^tree1:[0-9a-f]{64}$/),
    });
    expect(() => loadFunctionSettings({ SERVICELB_DIGEST: "md5" })).toThrow(/SERVICELB_DIGEST/);
  });
});
