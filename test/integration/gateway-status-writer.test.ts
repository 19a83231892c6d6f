/*
 * The status writer (shared/adapters/gateway-status.ts) against the Kubernetes API emulator: a
 * replace by resourceVersion, a conflict read again once, an object gone, a spec changed meanwhile.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadKubeConfig } from "../../shared/adapters/kube-config.js";
import { createStatusWriter, type HeldObject, type StatusWriter } from "../../shared/adapters/gateway-status.js";
import { statusDiffers } from "../../shared/core/gateway/status-merge.js";
import type { KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { httpRoute } from "../support/gateway-fixtures.js";
import { TestKubeApi } from "../support/kube-api.js";

let api: TestKubeApi;
let writer: StatusWriter;
const target = { kind: "HTTPRoute" as const, namespace: "default", name: "r" };
const spec = (path: string) => ({ parentRefs: [{ name: "gw" }], rules: [{ matches: [{ path: { value: path } }] }] });
const held = (o: KubeObject): HeldObject => ({
  resourceVersion: o.metadata.resourceVersion as string,
  generation: o.metadata.generation as number,
  status: o.status,
});
/** Adds a mark to whatever the object holds: the merge a write applies. */
const mark = (value: string) => (status: unknown) => ({ ...(status as object), mark: value });
const puts = () => api.requests.filter((r) => r.method === "PUT").length;
const signal = () => AbortSignal.timeout(5000);

beforeEach(async () => {
  api = await new TestKubeApi().start();
  writer = createStatusWriter(loadKubeConfig({ kubeconfig: await api.writeKubeconfig() }));
});

afterEach(async () => {
  await api.stop();
});

describe("status writer", () => {
  it("replaces the status subresource, and writes nothing when the merge changes nothing", async () => {
    const stored = api.upsert("HTTPRoute", httpRoute("r", spec("/")) as unknown as KubeObject);
    expect(await writer.write(target, held(stored), mark("a"), statusDiffers, signal())).toBe("written");
    const after = api.read("HTTPRoute", "default", "r")!;
    expect(after.status).toEqual({ mark: "a" });
    // The spec is the status subresource's to keep.
    expect(after.spec).toEqual(stored.spec);
    expect(await writer.write(target, held(after), mark("a"), statusDiffers, signal())).toBe("unchanged");
    expect(puts()).toBe(1);
  });

  it("on a conflict reads the object again and merges into what it holds now, once", async () => {
    const stored = api.upsert("HTTPRoute", httpRoute("r", spec("/")) as unknown as KubeObject);
    // Someone else's status lands after the pass listed the route.
    api.upsert("HTTPRoute", { ...stored, status: { theirs: true } });
    expect(await writer.write(target, held(stored), mark("a"), statusDiffers, signal())).toBe("written");
    expect(api.read("HTTPRoute", "default", "r")!.status).toEqual({ theirs: true, mark: "a" });
    expect(puts()).toBe(2);
  });

  it("gives up after a second conflict, for the next pass", async () => {
    const stored = api.upsert("HTTPRoute", httpRoute("r", spec("/")) as unknown as KubeObject);
    api.onRequest((req) => {
      if (req.method === "PUT") api.upsert("HTTPRoute", { ...api.read("HTTPRoute", "default", "r")! });
    });
    expect(await writer.write(target, held(stored), mark("a"), statusDiffers, signal())).toBe("conflict");
    expect(puts()).toBe(2);
  });

  it("leaves a route whose spec changed since (a newer generation) to the pass of that change", async () => {
    const stored = api.upsert("HTTPRoute", httpRoute("r", spec("/")) as unknown as KubeObject);
    api.upsert("HTTPRoute", { ...stored, spec: spec("/v2") });
    expect(await writer.write(target, held(stored), mark("a"), statusDiffers, signal())).toBe("superseded");
    expect(api.read("HTTPRoute", "default", "r")!.status).toBeUndefined();
  });

  it("says gone for an object deleted since the list (404), and throws on other refusals", async () => {
    const stored = api.upsert("HTTPRoute", httpRoute("r", spec("/")) as unknown as KubeObject);
    api.remove("HTTPRoute", "default", "r");
    expect(await writer.write(target, held(stored), mark("a"), statusDiffers, signal())).toBe("gone");
    const again = api.upsert("HTTPRoute", httpRoute("r", spec("/")) as unknown as KubeObject);
    api.failNext({ status: 403, reason: "Forbidden", message: "no", match: (r) => r.method === "PUT" });
    await expect(writer.write(target, held(again), mark("a"), statusDiffers, signal())).rejects.toMatchObject({
      code: 403,
    });
  });
});
