import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classifyEvent } from "../../../shared/app/cloudevents.js";
import { eventHint } from "../../../shared/app/event-hint.js";
import { parseRenderOptions } from "../../../shared/core/settings/options.js";
import { service, slice } from "../../support/fixtures.js";

const ALL = parseRenderOptions({});

/** Parsed as functions-framework parses a body: JSON.parse takes any depth. */
const nested = (levels: number, inner = "{}") => JSON.parse(`${'{"a":'.repeat(levels)}${inner}${"}".repeat(levels)}`);

const event = (type: string, data: unknown) => ({ specversion: "1.0", id: "e", type, source: "test", data });
const resource = (data: unknown) => event("dev.knative.apiserver.resource.update", data);
const ref = (data: unknown) => event("dev.knative.apiserver.ref.add", data);

function depth(value: unknown): number {
  if (typeof value !== "object" || value === null) return 0;
  return 1 + Math.max(0, ...Object.values(value).map(depth));
}

describe("eventHint", () => {
  const web = service("web", [{ port: 80 }]);
  const webSlice = slice("web", [{ port: 80 }], ["10.0.0.1"], { name: "web-x1" });
  const cases: [string, unknown][] = [
    ["a Service", resource(web)],
    ["a slice, named by its label", resource(webSlice)],
    ["a Service as JSON text", resource(JSON.stringify(web))],
    ["a Service as JSON bytes", resource(Buffer.from(JSON.stringify(web)))],
    ["a Service as JSON text inside JSON text", resource(JSON.stringify(JSON.stringify(web)))],
    [
      "a reference",
      ref({ kind: "EndpointSlice", namespace: "shop", name: "cart-x1", apiVersion: "discovery.k8s.io/v1" }),
    ],
    ["a ping", { specversion: "1.0", id: "p", type: "dev.knative.sources.ping", source: "/p" }],
    ["data nested 5,000 levels deep", resource(nested(5000))],
    ["a deep spec in a valid Service", resource({ ...web, spec: nested(5000) })],
    ["deep labels", resource({ ...webSlice, metadata: { ...webSlice.metadata, labels: nested(5000) } })],
    ["a deep label value", resource({ ...webSlice, metadata: { ...webSlice.metadata, labels: { x: nested(5000) } } })],
    ["a deep name", resource({ ...web, metadata: { name: nested(5000), namespace: "default" } })],
    ["a deep id", { ...resource(web), id: nested(5000) }],
    ["metadata as an array", resource({ ...web, metadata: [web.metadata] })],
    [
      "a __proto__ label",
      resource({ ...webSlice, metadata: { ...webSlice.metadata, labels: JSON.parse('{"__proto__": 1}') } }),
    ],
    ["not an object", "hello"],
    ["no data", { specversion: "1.0", id: "e", type: "dev.knative.apiserver.resource.add", source: "test" }],
  ];

  it.each(cases)(
    "%s: classified alike from its hint, after a structured clone, and the hint of the hint is the hint",
    (_, e) => {
      const hint = eventHint(e);
      expect(depth(hint)).toBeLessThanOrEqual(5);
      expect(classifyEvent(structuredClone(hint), ALL)).toEqual(classifyEvent(e, ALL));
      expect(eventHint(hint)).toEqual(hint);
    },
  );

  it("the issue's event is ignored as malformed, not a failure", () => {
    expect(classifyEvent(structuredClone(eventHint(resource(nested(5000)))), ALL)).toMatchObject({
      verdict: "malformed",
      reason: expect.stringContaining("not a Kubernetes object"),
    });
  });

  it("any JSON data: the hint clones, and classifies as the event does", () => {
    const json = fc.jsonValue({ maxDepth: 6 });
    const data = fc.oneof(
      json,
      fc.record({ apiVersion: json, kind: json, name: json, namespace: json, metadata: json }, { requiredKeys: [] }),
      fc.record(
        {
          apiVersion: fc.constantFrom("v1", "discovery.k8s.io/v1"),
          kind: fc.constantFrom("Service", "EndpointSlice"),
          metadata: fc.record(
            {
              name: fc.oneof(fc.string(), json),
              namespace: fc.oneof(fc.string(), json),
              labels: fc.oneof(json, fc.dictionary(fc.string(), json)),
            },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: [] },
      ),
    );
    fc.assert(
      fc.property(fc.constantFrom("resource", "ref"), data, fc.boolean(), (mode, d, asText) => {
        const e = event(`dev.knative.apiserver.${mode}.update`, asText ? JSON.stringify(d) : d);
        expect(classifyEvent(structuredClone(eventHint(e)), ALL)).toEqual(classifyEvent(e, ALL));
      }),
    );
  });
});
