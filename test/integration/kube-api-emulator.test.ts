import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { TestKubeApi } from "../support/kube-api.js";

const slice = (name: string, port: number): KubeObject => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { name, namespace: "default", labels: { "kubernetes.io/service-name": name } },
  addressType: "IPv4",
  ports: [{ name: "http", port, protocol: "TCP" }],
  endpoints: [{ addresses: ["10.0.0.1"], conditions: { ready: true } }],
});

describe("KubeApiEmulator", () => {
  let api: TestKubeApi;
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(api.url + path, {
      method,
      headers: { authorization: `Bearer ${api.token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // biome-ignore lint/suspicious/noExplicitAny: answers are read field by field, each assertion checks its field
    return { status: r.status, body: (await r.json()) as Record<string, any> };
  };
  const slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

  beforeEach(async () => {
    api = await new TestKubeApi().start();
  });
  afterEach(async () => {
    await api.stop();
  });

  it("pages a list from one revision even when objects change between its pages", async () => {
    for (let i = 0; i < 5; i++) api.upsert("EndpointSlice", slice(`s-${i}`, 80));
    const first = await call("GET", `${slices}?limit=2`);
    expect(first.body.items.map((o: KubeObject) => o.metadata.name)).toEqual(["s-0", "s-1"]);
    expect(first.body.metadata.remainingItemCount).toBe(3);
    api.upsert("EndpointSlice", slice("s-2", 81));
    api.remove("EndpointSlice", "default", "s-3");
    api.upsert("EndpointSlice", slice("s-25", 80));
    const second = await call("GET", `${slices}?limit=2&continue=${first.body.metadata.continue}`);
    expect(
      second.body.items.map((o: KubeObject) => [o.metadata.name, (o.ports as Array<{ port: number }>)[0]!.port]),
    ).toEqual([
      ["s-2", 80],
      ["s-3", 80],
    ]);
    expect(second.body.metadata.resourceVersion).toBe(first.body.metadata.resourceVersion);
    const third = await call("GET", `${slices}?limit=2&continue=${second.body.metadata.continue}`);
    expect(third.body.items.map((o: KubeObject) => o.metadata.name)).toEqual(["s-4"]);
    expect(third.body.metadata.continue).toBeUndefined();
    // A new list sees the writes.
    const now = await call("GET", slices);
    expect(now.body.items.map((o: KubeObject) => o.metadata.name)).toEqual(["s-0", "s-1", "s-2", "s-25", "s-4"]);
  });

  it("takes writes as kubectl sends them: create, replace, delete, each one revision and one watch event", async () => {
    const events: string[] = [];
    const watch = await fetch(`${api.url}${slices}?watch=true&resourceVersion=${api.resourceVersion}`, {
      headers: { authorization: `Bearer ${api.token}` },
    });
    const reader = watch.body!.getReader();
    void (async () => {
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        buf += Buffer.from(value!).toString();
        for (let nl = buf.indexOf("\n"); nl >= 0; buf = buf.slice(nl + 1), nl = buf.indexOf("\n")) {
          const e = JSON.parse(buf.slice(0, nl)) as { type: string; object: KubeObject };
          events.push(`${e.type} ${e.object.metadata.name} ${e.object.metadata.resourceVersion}`);
        }
      }
    })();

    const created = await call("POST", slices, slice("web", 80));
    expect(created.status).toBe(201);
    const rv = created.body.metadata.resourceVersion as string;
    expect(rv).toBe(api.resourceVersion);
    expect((await call("POST", slices, slice("web", 80))).body).toMatchObject({ code: 409, reason: "AlreadyExists" });

    const replaced = await call("PUT", `${slices}/web`, slice("web", 81));
    expect(replaced.status).toBe(200);
    expect(replaced.body.metadata.uid).toBe(created.body.metadata.uid);
    expect(Number(replaced.body.metadata.resourceVersion)).toBe(Number(rv) + 1);
    // Optimistic concurrency: a body naming an older resourceVersion is refused.
    const stale = { ...slice("web", 82), metadata: { ...slice("web", 82).metadata, resourceVersion: rv } };
    expect((await call("PUT", `${slices}/web`, stale)).body).toMatchObject({ code: 409, reason: "Conflict" });
    expect((await call("PUT", `${slices}/nothing`, slice("nothing", 80))).body).toMatchObject({
      code: 404,
      reason: "NotFound",
    });
    expect((await call("PUT", `${slices}/other`, slice("web", 80))).status).toBe(400);

    expect((await call("DELETE", `${slices}/web`)).body).toMatchObject({ status: "Success" });
    expect((await call("DELETE", `${slices}/web`)).status).toBe(404);

    api.forbid("endpointslices", ["create"]);
    expect((await call("POST", slices, slice("web", 80))).body).toMatchObject({ code: 403, reason: "Forbidden" });

    // The three writes were answered, so their events are on the wire: wait for them without a
    // deadline that a busy machine could miss (vitest's testTimeout bounds a test that hangs).
    while (events.length < 3) await new Promise((r) => setTimeout(r, 10));
    await reader.cancel();
    expect(events).toEqual([`ADDED web ${rv}`, `MODIFIED web ${Number(rv) + 1}`, `DELETED web ${Number(rv) + 2}`]);
  });
});
