import { describe, expect, it } from "vitest";
import { resolveGateway, type GatewayPorts } from "../../../../shared/core/gateway/resolve.js";
import type { GatewayRouting } from "../../../../shared/core/gateway/routing.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";
import {
  gateway,
  gatewayClass,
  httpRoute,
  type ListenerSpec,
  referenceGrant,
} from "../../../support/gateway-fixtures.js";

const PORTS: GatewayPorts = { httpPort: 80, reserved: new Map([[1936, "the stats page's"]]) };

/** Services v1, v2 (one ready endpoint each) and v3 (none), in `ns`. */
function backends(ns = "default") {
  return [
    service("v1", [{ port: 8080, name: "http" }], { namespace: ns }),
    slice("v1", [{ name: "http", port: 9001 }], ["10.0.0.1"], { namespace: ns }),
    service("v2", [{ port: 8080, name: "http" }], { namespace: ns }),
    slice("v2", [{ name: "http", port: 9002 }], ["10.0.0.2"], { namespace: ns }),
    service("v3", [{ port: 8080, name: "http" }], { namespace: ns }),
  ];
}

function resolve(items: unknown[], ports = PORTS): GatewayRouting {
  const snap = snapshotFromDocuments([list(items)]);
  expect(snap.problems).toEqual([]);
  const r = resolveGateway(snap, ports);
  if (!r) throw new Error("no gateway objects");
  return r;
}

const gw = (listeners: ListenerSpec[] = [{ name: "http", port: 80 }]) => gateway("gw", listeners);
const route = (name: string, spec: Record<string, unknown>, opts?: Parameters<typeof httpRoute>[2]) =>
  httpRoute(name, { parentRefs: [{ name: "gw", namespace: "default" }], ...spec }, opts);
const to = (name: string, extra: Record<string, unknown> = {}) => ({ name, port: 8080, ...extra });

function parent(r: GatewayRouting, name: string, ns = "default") {
  const status = r.status.httpRoutes.find((s) => s.name === name && s.namespace === ns);
  if (!status) throw new Error(`no status for ${ns}/${name}`);
  return status.parents.map((p) => Object.fromEntries(p.conditions.map((c) => [c.type, `${c.status} ${c.reason}`])));
}

describe("resolving Gateway API objects", () => {
  it("is null for a snapshot without Gateway API objects", () => {
    expect(resolveGateway(snapshotFromDocuments([list(backends())]), PORTS)).toBeNull();
  });

  it("serves only GatewayClasses of servicelb's controller and their Gateways", () => {
    const r = resolve([
      gatewayClass(),
      gatewayClass("other", "example.com/other"),
      gw(),
      gateway("theirs", [{ name: "http", port: 81 }], { className: "other" }),
      route("mine", { rules: [{ backendRefs: [to("v1")] }] }),
      httpRoute("theirs", { parentRefs: [{ name: "theirs" }], rules: [{ backendRefs: [to("v1")] }] }),
      ...backends(),
    ]);
    expect(r.status.gatewayClasses.map((c) => c.name)).toEqual(["servicelb"]);
    expect(r.status.gateways.map((g) => g.name)).toEqual(["gw"]);
    expect(r.status.httpRoutes.map((s) => s.name)).toEqual(["mine"]);
    expect(r.frontends.map((f) => [f.port, f.shared])).toEqual([[80, true]]);
  });

  it("accepts a simple same-namespace route and counts it on its listener, with the generations observed", () => {
    const r = resolve([
      gatewayClass(),
      gateway("gw", [{ name: "http", port: 8081 }], { generation: 4 }),
      route("simple", { rules: [{ backendRefs: [to("v1")] }] }, { generation: 7 }),
      ...backends(),
    ]);
    expect(parent(r, "simple")).toEqual([{ Accepted: "True Accepted", ResolvedRefs: "True ResolvedRefs" }]);
    const status = r.status.httpRoutes[0]!.parents[0]!;
    expect(status.controllerName).toBe("servicelb.io/gateway-controller");
    expect(status.parentRef).toEqual({
      group: "gateway.networking.k8s.io",
      kind: "Gateway",
      namespace: "default",
      name: "gw",
    });
    expect(status.conditions.every((c) => c.observedGeneration === 7)).toBe(true);
    const g = r.status.gateways[0]!;
    expect(g.conditions.map((c) => [c.type, c.status, c.observedGeneration])).toEqual([
      ["Accepted", "True", 4],
      ["Programmed", "Unknown", 4],
    ]);
    expect(g.listeners[0]).toMatchObject({
      name: "http",
      attachedRoutes: 1,
      supportedKinds: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute" }],
    });
    expect(r.frontends[0]!.rules[0]!.picks).toEqual([{ backend: "gw:default:v1:8080", weight: 1 }]);
    expect(r.backends).toEqual([
      { name: "gw:default:v1:8080", namespace: "default", service: "v1", port: 8080, servers: ["10.0.0.1:9001"] },
    ]);
  });

  it("refuses a route from another namespace unless the listener allows it (CrossNamespace, InvalidCrossNamespaceParentRef)", () => {
    const items = [
      gatewayClass(),
      gateway("same", [{ name: "http", port: 8081 }]),
      gateway("all", [{ name: "http", port: 8082, allowedRoutes: { namespaces: { from: "All" } } }]),
      gateway("labelled", [
        {
          name: "http",
          port: 8083,
          allowedRoutes: { namespaces: { from: "Selector", selector: { matchLabels: { team: "web" } } } },
        },
      ]),
      gateway("by-name", [
        {
          name: "http",
          port: 8084,
          allowedRoutes: {
            namespaces: {
              from: "Selector",
              selector: {
                matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: ["apps"] }],
              },
            },
          },
        },
      ]),
      {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: "apps", labels: { team: "web", "kubernetes.io/metadata.name": "apps" } },
      },
      ...["same", "all", "labelled", "by-name"].map((g) =>
        httpRoute(
          `to-${g}`,
          { parentRefs: [{ name: g, namespace: "default" }], rules: [{ backendRefs: [to("v1")] }] },
          { namespace: "apps" },
        ),
      ),
      ...backends("apps"),
    ];
    const r = resolve(items);
    expect(parent(r, "to-same", "apps")[0]!.Accepted).toBe("False NotAllowedByListeners");
    expect(parent(r, "to-all", "apps")[0]!.Accepted).toBe("True Accepted");
    expect(parent(r, "to-labelled", "apps")[0]!.Accepted).toBe("True Accepted");
    expect(parent(r, "to-by-name", "apps")[0]!.Accepted).toBe("True Accepted");
    const attached = Object.fromEntries(r.status.gateways.map((g) => [g.name, g.listeners[0]!.attachedRoutes]));
    expect(attached).toEqual({ same: 0, all: 1, labelled: 1, "by-name": 1 });
  });

  it("names no matching parent when sectionName or port fit no listener (InvalidParentRefNotMatchingSectionName)", () => {
    const r = resolve([
      gatewayClass(),
      gw([{ name: "http", port: 8081 }]),
      route("by-section", { parentRefs: [{ name: "gw", sectionName: "nope" }], rules: [{ backendRefs: [to("v1")] }] }),
      route("by-port", { parentRefs: [{ name: "gw", port: 9999 }], rules: [{ backendRefs: [to("v1")] }] }),
      route("both-fit", {
        parentRefs: [{ name: "gw", sectionName: "http", port: 8081 }],
        rules: [{ backendRefs: [to("v1")] }],
      }),
      ...backends(),
    ]);
    expect(parent(r, "by-section")[0]!.Accepted).toBe("False NoMatchingParent");
    expect(parent(r, "by-port")[0]!.Accepted).toBe("False NoMatchingParent");
    expect(parent(r, "both-fit")[0]!.Accepted).toBe("True Accepted");
    expect(r.status.httpRoutes.find((s) => s.name === "both-fit")!.parents[0]!.parentRef).toMatchObject({
      sectionName: "http",
      port: 8081,
    });
  });

  it("does not attach a route whose hostnames miss every listener's, and counts only accepted routes", () => {
    const r = resolve([
      gatewayClass(),
      gw([
        { name: "listener-1", port: 8081, hostname: "very.specific.com" },
        { name: "listener-2", port: 8081, hostname: "*.wildcard.io" },
      ]),
      route("fits", { hostnames: ["*.specific.com"], rules: [{ backendRefs: [to("v1")] }] }),
      route("misses", { hostnames: ["specific.but.wrong.com", "wildcard.io"], rules: [{ backendRefs: [to("v2")] }] }),
      ...backends(),
    ]);
    expect(parent(r, "fits")[0]!.Accepted).toBe("True Accepted");
    expect(parent(r, "misses")[0]!.Accepted).toBe("False NoMatchingListenerHostname");
    expect(r.status.gateways[0]!.listeners.map((l) => l.attachedRoutes)).toEqual([1, 0]);
    expect(r.frontends[0]!.entries.map((e) => e.host)).toEqual([{ name: "very.specific.com", wildcard: false }]);
    expect(r.backends.map((b) => b.name)).toEqual(["gw:default:v1:8080"]);
  });

  it("resolves cross-namespace backendRefs only with a ReferenceGrant (ReferenceGrant, InvalidCrossNamespaceBackendRef)", () => {
    const routeTo = (name: string, svc: string) =>
      route(name, { rules: [{ backendRefs: [to(svc, { namespace: "backends" })] }] });
    const base = [
      gatewayClass(),
      gw(),
      routeTo("granted", "v1"),
      routeTo("named-other", "v2"),
      ...backends("backends"),
    ];
    const without = resolve(base);
    expect(parent(without, "granted")[0]).toEqual({ Accepted: "True Accepted", ResolvedRefs: "False RefNotPermitted" });
    expect(without.frontends[0]!.rules[0]!.picks).toEqual([{ backend: null, weight: 1 }]);
    const grants = [
      referenceGrant("only-v1", "backends", { namespace: "default" }, { name: "v1" }),
      // Grants in the route's own namespace, or from another kind, grant nothing (InvalidReferenceGrant).
      referenceGrant("wrong-place", "default", { namespace: "default" }),
      referenceGrant("wrong-kind", "backends", { namespace: "default", kind: "GRPCRoute" }),
    ];
    const withGrant = resolve([...base, ...grants]);
    expect(parent(withGrant, "granted")[0]!.ResolvedRefs).toBe("True ResolvedRefs");
    expect(parent(withGrant, "named-other")[0]!.ResolvedRefs).toBe("False RefNotPermitted");
  });

  it("gives an invalid reference's share to 500, with the spec's reason (InvalidNonExistentBackendRef, InvalidBackendRefUnknownKind)", () => {
    const r = resolve([
      gatewayClass(),
      gw(),
      route("missing", { rules: [{ backendRefs: [to("nope")] }] }),
      route("kind", { rules: [{ backendRefs: [{ group: "example.com", kind: "Bucket", name: "v1" }] }] }),
      route("port", { rules: [{ backendRefs: [to("v1", { port: 1234 })] }] }),
      route("partly", {
        rules: [
          {
            backendRefs: [
              { ...to("v1"), weight: 3 },
              { ...to("gone"), weight: 1 },
            ],
          },
        ],
      }),
      ...backends(),
    ]);
    expect(parent(r, "missing")[0]!.ResolvedRefs).toBe("False BackendNotFound");
    expect(parent(r, "kind")[0]!.ResolvedRefs).toBe("False InvalidKind");
    expect(parent(r, "port")[0]!.ResolvedRefs).toBe("False BackendNotFound");
    const partly = r.frontends[0]!.rules.find((x) => x.route === "default/partly")!;
    expect(partly.picks).toEqual([
      { backend: "gw:default:v1:8080", weight: 3 },
      { backend: null, weight: 1 },
    ]);
  });

  it("keeps a Service without ready endpoints as a backend without servers (503)", () => {
    const r = resolve([gatewayClass(), gw(), route("empty", { rules: [{ backendRefs: [to("v3")] }] }), ...backends()]);
    expect(parent(r, "empty")[0]!.ResolvedRefs).toBe("True ResolvedRefs");
    expect(r.backends).toEqual([
      { name: "gw:default:v3:8080", namespace: "default", service: "v3", port: 8080, servers: [] },
    ]);
  });

  it("serves the rules it supports and reports the rest: PartiallyInvalid, or not Accepted when none is left", () => {
    const r = resolve([
      gatewayClass(),
      gw(),
      route("mixed", {
        rules: [
          { matches: [{ path: { type: "RegularExpression", value: "/r.*" } }], backendRefs: [to("v1")] },
          { matches: [{ path: { type: "PathPrefix", value: "/ok" } }], backendRefs: [to("v1")] },
        ],
      }),
      route("none", { rules: [{ filters: [{ type: "RequestMirror", requestMirror: {} }], backendRefs: [to("v1")] }] }),
      ...backends(),
    ]);
    expect(parent(r, "mixed")[0]).toEqual({
      Accepted: "True Accepted",
      ResolvedRefs: "True ResolvedRefs",
      PartiallyInvalid: "True UnsupportedValue",
    });
    expect(parent(r, "none")[0]!.Accepted).toBe("False UnsupportedValue");
    expect(r.frontends[0]!.rules.map((x) => `${x.route}#${x.ruleIndex}`)).toEqual(["default/mixed#1"]);
    expect(r.warnings.some((w) => w.includes("RequestMirror is not supported"))).toBe(true);
  });

  it("refuses listeners it cannot serve, with the spec's reasons", () => {
    const r = resolve([
      gatewayClass(),
      gw([
        { name: "tls", port: 443, protocol: "TLS" },
        { name: "stats", port: 1936 },
        { name: "a", port: 8081, hostname: "x.com" },
        { name: "b", port: 8081, hostname: "x.com" },
        { name: "kinds", port: 8082, allowedRoutes: { kinds: [{ kind: "GRPCRoute" }] } },
        { name: "fine", port: 8083 },
      ]),
    ]);
    const conditions = Object.fromEntries(
      r.status.gateways[0]!.listeners.map((l) => [
        l.name,
        l.conditions.filter((c) => c.status !== "Unknown").map((c) => `${c.type} ${c.status} ${c.reason}`),
      ]),
    );
    expect(conditions.tls).toContain("Accepted False UnsupportedProtocol");
    expect(conditions.stats).toContain("Accepted False PortUnavailable");
    expect(conditions.a).toContain("Conflicted True HostnameConflict");
    expect(conditions.b).toContain("Conflicted True HostnameConflict");
    expect(conditions.kinds).toContain("ResolvedRefs False InvalidRouteKinds");
    expect(conditions.fine).toEqual([
      "Accepted True Accepted",
      "ResolvedRefs True ResolvedRefs",
      "Conflicted False NoConflicts",
    ]);
    expect(r.status.gateways[0]!.conditions[0]).toMatchObject({ type: "Accepted", status: "True" });
  });

  it("orders entries across routes as the spec does (MatchingAcrossRoutes)", () => {
    const r = resolve([
      gatewayClass(),
      gw(),
      route("matching-part1", {
        hostnames: ["example.com", "example.net"],
        rules: [
          {
            matches: [{ path: { type: "PathPrefix", value: "/" } }, { headers: [{ name: "version", value: "one" }] }],
            backendRefs: [to("v1")],
          },
        ],
      }),
      route("matching-part2", {
        hostnames: ["example.com"],
        rules: [
          {
            matches: [{ path: { type: "PathPrefix", value: "/v2" } }, { headers: [{ name: "version", value: "two" }] }],
            backendRefs: [to("v2")],
          },
        ],
      }),
      ...backends(),
    ]);
    const f = r.frontends[0]!;
    const shown = f.entries.map(
      (e) =>
        `${e.host?.name} ${e.path.value} ${e.headers.map((h) => `${h.name}=${h.value}`).join(",")} → ${f.rules[e.rule]!.route}`,
    );
    expect(shown).toEqual([
      "example.com /v2  → default/matching-part2",
      // One header each, no timestamps: namespace/name decides.
      "example.com / version=one → default/matching-part1",
      "example.com / version=two → default/matching-part2",
      "example.com /  → default/matching-part1",
      "example.net / version=one → default/matching-part1",
      "example.net /  → default/matching-part1",
    ]);
  });

  it("gives the same routing whatever order the objects were listed in", () => {
    const items = [
      gatewayClass(),
      gw([
        { name: "a", port: 8081 },
        { name: "b", port: 8082, hostname: "*.example.com" },
      ]),
      route(
        "r1",
        { rules: [{ matches: [{ path: { type: "Exact", value: "/x" } }], backendRefs: [to("v1")] }] },
        { created: "2026-01-02T00:00:00Z" },
      ),
      route(
        "r2",
        { hostnames: ["a.example.com"], rules: [{ backendRefs: [to("v2"), to("v1")] }] },
        { created: "2026-01-01T00:00:00Z" },
      ),
      route("r3", { rules: [{ matches: [{ method: "GET" }], backendRefs: [to("v3")] }] }),
      ...backends(),
    ];
    const forward = resolve(items);
    const backward = resolve([...items].reverse());
    expect(backward).toEqual(forward);
  });

  it("redirects to the listener's port unless the redirect names a scheme or port (RedirectHostAndStatus, RedirectPortAndScheme)", () => {
    const redirect = (name: string, requestRedirect: Record<string, unknown>) =>
      route(name, {
        rules: [
          {
            matches: [{ path: { type: "Exact", value: `/${name}` } }],
            filters: [{ type: "RequestRedirect", requestRedirect }],
          },
        ],
      });
    const r = resolve([
      gatewayClass(),
      gw([{ name: "http", port: 8081 }]),
      redirect("host", { hostname: "example.org", statusCode: 301 }),
      redirect("https", { scheme: "https" }),
      redirect("port", { port: 8443, scheme: "https" }),
      redirect("port80", { port: 80 }),
    ]);
    const byRoute = Object.fromEntries(r.frontends[0]!.rules.map((x) => [x.route, x.redirect]));
    expect(byRoute["default/host"]).toEqual({ scheme: null, hostname: "example.org", port: 8081, statusCode: 301 });
    expect(byRoute["default/https"]).toEqual({ scheme: "https", hostname: null, port: null, statusCode: 302 });
    expect(byRoute["default/port"]).toMatchObject({ scheme: "https", port: 8443 });
    expect(byRoute["default/port80"]).toMatchObject({ scheme: null, port: null });
  });
});
