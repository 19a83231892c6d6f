import { CloudEvent } from "cloudevents";
import { describe, expect, it } from "vitest";
import { parseRenderOptions } from "../../../shared/core/settings/options.js";
import { classifyEvent, type ScopeOptions } from "../../../shared/app/cloudevents.js";
import { service, slice } from "../../support/fixtures.js";

// Events in the shape functions-framework hands to a CloudEvent function: context attributes as
// properties (ce-* headers in binary mode, top-level fields in structured mode) and `data`.

const ALL: ScopeOptions = parseRenderOptions({});
const SOURCE = "https://10.96.0.1:443";

function resourceEvent(verb: string, obj: unknown, extra: Record<string, unknown> = {}) {
  return {
    specversion: "1.0",
    id: "e1",
    type: `dev.knative.apiserver.resource.${verb}`,
    source: SOURCE,
    datacontenttype: "application/json",
    data: obj,
    ...extra,
  };
}

function refEvent(verb: string, data: unknown) {
  return {
    specversion: "1.0",
    id: "e2",
    type: `dev.knative.apiserver.ref.${verb}`,
    source: SOURCE,
    datacontenttype: "application/json",
    data,
  };
}

const web = service("web", [{ port: 80 }]);
const webSlice = slice("web", [{ port: 80 }], ["10.0.0.1"], { name: "web-x1" });

describe("classifyEvent", () => {
  it("treats a Cloud Scheduler tick through Pub/Sub (Cloud Functions) as a resync", () => {
    const tick = {
      specversion: "1.0",
      id: "g",
      type: "google.cloud.pubsub.topic.v1.messagePublished",
      source: "//pubsub.googleapis.com/projects/p/topics/servicelb-reconcile",
      data: { message: { data: "" } },
    };
    expect(classifyEvent(tick, ALL)).toMatchObject({ verdict: "resync", id: "g" });
  });

  it("treats a PingSource tick as a resync, whatever its payload", () => {
    const tick = {
      specversion: "1.0",
      id: "p",
      type: "dev.knative.sources.ping",
      source: "/apis/v1/namespaces/lb/pingsources/resync",
    };
    expect(classifyEvent(tick, ALL)).toMatchObject({ verdict: "resync", id: "p" });
    expect(classifyEvent({ ...tick, data: Buffer.from("anything") }, ALL).verdict).toBe("resync");
  });

  it.each(["add", "update", "delete"])("finds the object of a resource.%s event", (verb) => {
    expect(classifyEvent(resourceEvent(verb, web), ALL)).toMatchObject({
      verdict: "relevant",
      object: { apiVersion: "v1", kind: "Service", namespace: "default", name: "web", service: "web" },
    });
  });

  it.each(["add", "update", "delete"])("finds the object of a ref.%s event", (verb) => {
    expect(
      classifyEvent(
        refEvent(verb, {
          kind: "EndpointSlice",
          namespace: "shop",
          name: "cart-x1",
          apiVersion: "discovery.k8s.io/v1",
        }),
        ALL,
      ),
    ).toMatchObject({
      verdict: "relevant",
      object: { kind: "EndpointSlice", namespace: "shop", name: "cart-x1", service: undefined },
    });
  });

  it("takes a slice's Service from its label in resource mode", () => {
    expect(classifyEvent(resourceEvent("update", webSlice), ALL).object).toMatchObject({
      name: "web-x1",
      service: "web",
    });
  });

  it("accepts a cloudevents SDK event object and JSON data as text or bytes", () => {
    const sdk = new CloudEvent({
      type: "dev.knative.apiserver.resource.add",
      source: SOURCE,
      datacontenttype: "application/json",
      data: web,
    });
    expect(classifyEvent(sdk, ALL).verdict).toBe("relevant");
    expect(classifyEvent(resourceEvent("add", JSON.stringify(web)), ALL).verdict).toBe("relevant");
    expect(classifyEvent(resourceEvent("add", Buffer.from(JSON.stringify(web))), ALL).verdict).toBe("relevant");
    // A Buffer reaches the worker thread as a plain Uint8Array (structured clone), at an offset in its pool.
    const pooled = Buffer.from(`xx${JSON.stringify(web)}`).subarray(2);
    const cloned = structuredClone(pooled);
    expect(cloned).not.toBeInstanceOf(Buffer);
    expect(classifyEvent(resourceEvent("add", cloned), ALL).verdict).toBe("relevant");
  });

  it("ignores kinds the snapshot is not made of, including other groups' Service kinds", () => {
    const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "default" } };
    const knative = {
      apiVersion: "serving.knative.dev/v1",
      kind: "Service",
      metadata: { name: "web", namespace: "default" },
    };
    expect(classifyEvent(resourceEvent("add", configMap), ALL)).toMatchObject({
      verdict: "irrelevant",
      reason: expect.stringContaining("ConfigMap"),
    });
    expect(classifyEvent(resourceEvent("add", knative), ALL)).toMatchObject({
      verdict: "irrelevant",
      reason: expect.stringContaining("serving.knative.dev"),
    });
    expect(
      classifyEvent(refEvent("add", { kind: "Pod", namespace: "default", name: "p", apiVersion: "v1" }), ALL).verdict,
    ).toBe("irrelevant");
  });

  it("counts v1 Endpoints as relevant (the fallback when a cluster has no EndpointSlices)", () => {
    expect(
      classifyEvent(refEvent("update", { kind: "Endpoints", namespace: "default", name: "web", apiVersion: "v1" }), ALL)
        .verdict,
    ).toBe("relevant");
  });

  it("ignores namespaces outside --namespace", () => {
    const scope = parseRenderOptions({ namespace: "shop" });
    expect(classifyEvent(resourceEvent("add", web), scope)).toMatchObject({
      verdict: "irrelevant",
      reason: expect.stringContaining("--namespace shop"),
    });
    expect(
      classifyEvent(resourceEvent("add", service("cart", [{ port: 80 }], { namespace: "shop" })), scope).verdict,
    ).toBe("relevant");
    expect(
      classifyEvent(
        refEvent("delete", {
          kind: "EndpointSlice",
          namespace: "default",
          name: "web-x1",
          apiVersion: "discovery.k8s.io/v1",
        }),
        scope,
      ).verdict,
    ).toBe("irrelevant");
  });

  it("ignores kube-system and default/kubernetes unless --expose-system", () => {
    const dns = service("kube-dns", [{ port: 53 }], { namespace: "kube-system" });
    const apiSvc = service("kubernetes", [{ port: 443 }]);
    const apiSlice = slice("kubernetes", [{ port: 6443 }], ["10.0.0.9"], { name: "kubernetes" });
    for (const obj of [dns, apiSvc, apiSlice]) {
      expect(classifyEvent(resourceEvent("update", obj), ALL).verdict).toBe("irrelevant");
      expect(classifyEvent(resourceEvent("update", obj), parseRenderOptions({ exposeSystem: true })).verdict).toBe(
        "relevant",
      );
    }
  });

  it("ignores other Services under --target-service, but re-lists for a slice it cannot attribute", () => {
    const byName = parseRenderOptions({ targetService: "web" });
    const byRef = parseRenderOptions({ targetService: "shop/web" });
    expect(classifyEvent(resourceEvent("add", web), byName).verdict).toBe("relevant");
    expect(classifyEvent(resourceEvent("add", service("api", [{ port: 80 }])), byName).verdict).toBe("irrelevant");
    expect(classifyEvent(resourceEvent("add", web), byRef).verdict).toBe("irrelevant");
    expect(classifyEvent(resourceEvent("add", webSlice), byName).verdict).toBe("relevant");
    expect(
      classifyEvent(
        refEvent("add", {
          kind: "EndpointSlice",
          namespace: "default",
          name: "api-x1",
          apiVersion: "discovery.k8s.io/v1",
        }),
        byName,
      ).verdict,
    ).toBe("relevant");
  });

  it("counts the Gateway API kinds as relevant in either mode, a cluster-scoped GatewayClass too, and scopes them by --namespace only", () => {
    const GW = "gateway.networking.k8s.io";
    const route = {
      apiVersion: `${GW}/v1`,
      kind: "HTTPRoute",
      metadata: { name: "kubernetes", namespace: "kube-system" },
    };
    const grant = { apiVersion: `${GW}/v1beta1`, kind: "ReferenceGrant", metadata: { name: "g", namespace: "shop" } };
    const cls = { apiVersion: `${GW}/v1`, kind: "GatewayClass", metadata: { name: "servicelb" } };
    // kube-system, a name like the API's Service, --target-service: Service rules, not routes'.
    const narrow = parseRenderOptions({ targetService: "web" });
    for (const obj of [route, grant, cls]) {
      expect(classifyEvent(resourceEvent("update", obj), narrow), obj.kind).toMatchObject({
        verdict: "relevant",
        reason: `${obj.kind} changed`,
      });
      const { name, namespace } = obj.metadata as { name: string; namespace?: string };
      expect(
        classifyEvent(refEvent("delete", { kind: obj.kind, name, namespace, apiVersion: obj.apiVersion }), ALL).verdict,
      ).toBe("relevant");
    }
    expect(
      classifyEvent(refEvent("add", { kind: "Gateway", namespace: "default", name: "gw", apiVersion: `${GW}/v1` }), ALL)
        .verdict,
    ).toBe("relevant");
    const shop = parseRenderOptions({ namespace: "shop" });
    expect(classifyEvent(resourceEvent("add", route), shop).verdict).toBe("irrelevant");
    expect(classifyEvent(resourceEvent("add", grant), shop).verdict).toBe("relevant");
    expect(classifyEvent(resourceEvent("add", cls), shop).verdict).toBe("relevant");
    // Another group's HTTPRoute is not ours.
    expect(classifyEvent(resourceEvent("add", { ...route, apiVersion: "example.com/v1" }), ALL).verdict).toBe(
      "irrelevant",
    );
  });

  it("re-lists whatever the labels say under --selector: a Service that stops matching must leave the config", () => {
    const scope = parseRenderOptions({ selector: "expose=yes" });
    expect(classifyEvent(resourceEvent("update", web), scope).verdict).toBe("relevant");
  });

  it("reports event types it does not handle as unknown", () => {
    expect(
      classifyEvent(
        { specversion: "1.0", id: "x", type: "dev.knative.apiserver.object.add", source: SOURCE, data: {} },
        ALL,
      ).verdict,
    ).toBe("unknown");
    expect(classifyEvent({ specversion: "1.0", id: "x", type: "com.example.order", source: "/o" }, ALL).verdict).toBe(
      "unknown",
    );
  });

  it.each([
    ["not an object", "hello"],
    ["no id", { specversion: "1.0", type: "dev.knative.sources.ping", source: "/p" }],
    ["no specversion", { id: "1", type: "dev.knative.sources.ping", source: "/p" }],
    ["resource data without metadata", resourceEvent("add", { apiVersion: "v1", kind: "Service" })],
    [
      "resource data without a name",
      resourceEvent("add", { apiVersion: "v1", kind: "Service", metadata: { namespace: "default" } }),
    ],
    ["resource data that is not JSON", resourceEvent("add", "{oops")],
    ["ref data that is an array", refEvent("add", ["Service"])],
    ["ref data without a kind", refEvent("add", { name: "web", namespace: "default" })],
    ["no data at all", resourceEvent("add", undefined)],
  ])("reports %s as malformed", (_what, event) => {
    expect(classifyEvent(event, ALL).verdict).toBe("malformed");
  });
});
