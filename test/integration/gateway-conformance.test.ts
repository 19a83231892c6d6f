/*
 * More of the Gateway API conformance suite's HTTPRoute behaviours through a real HAProxy
 * (kubernetes-sigs/gateway-api conformance/tests/httproute-*.yaml and .go): the suites' own routes
 * and requests, each suite under a hostname of its own so that they share one listener without
 * meeting. gateway-traffic.test.ts holds the others.
 *
 * MultipleGateways differs from the suite on one point: servicelb's Gateways share the fleet's
 * addresses (docs/gateway-api.md), so the two Gateways listen on two ports rather than two
 * addresses.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import type { GatewayStatus } from "../../shared/core/gateway/status.js";
import { list, service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute, referenceGrant } from "../support/gateway-fixtures.js";
import {
  haproxyCheck,
  loopbackOptions,
  requireHaproxy,
  runHaproxy,
  type LoopbackSetup,
  type RunningHaproxy,
} from "../support/haproxy.js";
import { echoBackend, freePort, type EchoBackend, httpRequest } from "../support/net.js";

const INFRA = "gateway-conformance-infra";
const APPS = "gateway-conformance-app-backend";
const renderer = new Renderer(loadTemplates());

const exact = (value: string) => ({ path: { type: "Exact", value } });
const prefix = (value: string) => ({ path: { type: "PathPrefix", value } });
const headers = (pairs: Record<string, string>) => ({
  headers: Object.entries(pairs).map(([name, value]) => ({ name, value })),
});
const to = (name: string, namespace?: string) => ({ name, port: 8080, ...(namespace ? { namespace } : {}) });
const rule = (matches: unknown[], backend: string) => ({ matches, backendRefs: [to(backend)] });

describe("Gateway API conformance behaviours through a real HAProxy", () => {
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let status: GatewayStatus;
  let same: number;
  let all: number;

  const route = (
    name: string,
    hostname: string,
    rules: unknown[],
    parentRefs: unknown[] = [{ name: "same-namespace" }],
  ) => httpRoute(name, { parentRefs, hostnames: [hostname], rules }, { namespace: INFRA });

  /** A Service of 8080 → 3000, its pods one echo backend, as the suite's infra-backend-vN. */
  const backend = (name: string, namespace = INFRA, opts: { headless?: boolean; ipv6Slice?: boolean } = {}) => [
    service(name, [{ port: 8080, name: "first-port", targetPort: 3000 }], {
      namespace,
      ...(opts.headless ? { clusterIP: "None" } : {}),
    }),
    slice(name, [{ name: "first-port", port: be[name]!.port }], ["127.0.0.1"], { name: `${name}-ip4`, namespace }),
    ...(opts.ipv6Slice
      ? [
          slice(name, [{ name: "first-port", port: be[name]!.port }], [], {
            name: `${name}-ip6`,
            namespace,
            addressType: "IPv6",
          }),
        ]
      : []),
  ];

  beforeAll(async () => {
    requireHaproxy();
    const names = [
      "infra-backend-v1",
      "infra-backend-v2",
      "infra-backend-v3",
      "manual-endpointslices",
      "headless",
      "headless-manual-endpointslices",
      "app-backend-v1",
      "app-backend-v2",
    ];
    for (const n of names) be[n] = await echoBackend(n);
    setup = await loopbackOptions();
    do same = await freePort();
    while (same === setup.options.httpPort || same === setup.options.statsPort);
    do all = await freePort();
    while (all === same || all === setup.options.httpPort || all === setup.options.statsPort);
    const items = [
      gatewayClass(),
      gateway("same-namespace", [{ name: "http", port: same }], { namespace: INFRA }),
      gateway("all-namespaces", [{ name: "http", port: all, allowedRoutes: { namespaces: { from: "All" } } }], {
        namespace: INFRA,
      }),
      ...backend("infra-backend-v1"),
      ...backend("infra-backend-v2"),
      ...backend("infra-backend-v3"),
      ...backend("manual-endpointslices", INFRA, { ipv6Slice: true }),
      ...backend("headless", INFRA, { headless: true }),
      ...backend("headless-manual-endpointslices", INFRA, { headless: true, ipv6Slice: true }),
      ...backend("app-backend-v1", APPS),
      ...backend("app-backend-v2", APPS),
      // httproute-simple-same-namespace.yaml
      route("gateway-conformance-infra-test", "simple.example", [{ backendRefs: [to("infra-backend-v1")] }]),
      // httproute-path-match-order.yaml
      route("path-matching-order", "order.example", [
        rule([exact("/match")], "infra-backend-v1"),
        rule([exact("/match/exact")], "infra-backend-v2"),
        rule([exact("/match/exact/one")], "infra-backend-v3"),
        rule([prefix("/match/")], "infra-backend-v3"),
        rule([prefix("/match/prefix/")], "infra-backend-v1"),
        rule([prefix("/match/prefix/one")], "infra-backend-v2"),
      ]),
      // httproute-header-matching.yaml
      route("header-matching", "headers.example", [
        rule([headers({ version: "one" })], "infra-backend-v1"),
        rule([headers({ version: "two" })], "infra-backend-v2"),
        rule([headers({ version: "two", color: "orange" })], "infra-backend-v1"),
        rule([headers({ color: "blue" }), headers({ color: "green" })], "infra-backend-v1"),
        rule([headers({ color: "red" }), headers({ color: "yellow" })], "infra-backend-v2"),
      ]),
      // httproute-matching.yaml
      route("matching", "matching.example", [
        rule([prefix("/"), headers({ version: "one" })], "infra-backend-v1"),
        rule([prefix("/v2"), headers({ version: "two" })], "infra-backend-v2"),
      ]),
      // httproute-service-types.yaml
      route("service-types", "types.example", [
        rule([exact("/manual-endpointslices")], "manual-endpointslices"),
        rule([exact("/headless")], "headless"),
        rule([exact("/headless-manual-endpointslices")], "headless-manual-endpointslices"),
      ]),
      // httproute-partially-invalid-via-invalid-reference-grant.yaml: the grant names v1 only.
      referenceGrant("invalid-reference-grant", APPS, { namespace: INFRA }, { name: "app-backend-v1" }),
      route("invalid-reference-grant", "partial.example", [
        { matches: [prefix("/v2")], backendRefs: [to("app-backend-v2", APPS)] },
        { backendRefs: [to("app-backend-v1", APPS)] },
      ]),
      // httproute-303-redirect.yaml
      route("303-redirect", "redirect.example", [
        {
          matches: [prefix("/see-other")],
          filters: [{ type: "RequestRedirect", requestRedirect: { statusCode: 303 } }],
        },
      ]),
      // A rule without backendRefs or a filter that answers: the spec's 500.
      route("no-backend-refs", "empty.example", [{ matches: [prefix("/")] }]),
      // httproute-multiple-gateways.yaml, each Gateway on a port of its own
      route(
        "multiple-gateways-shared-route",
        "multi.example",
        [rule([prefix("/shared")], "infra-backend-v1")],
        [{ name: "same-namespace" }, { name: "all-namespaces" }],
      ),
      route("same-namespace-dedicated-route", "multi.example", [rule([prefix("/")], "infra-backend-v2")]),
      route(
        "all-namespaces-dedicated-route",
        "multi.example",
        [rule([prefix("/")], "infra-backend-v3")],
        [{ name: "all-namespaces" }],
      ),
    ];
    const rendered = renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer);
    status = rendered.gatewayStatus!;
    expect(rendered.warnings.map((w) => w.message)).toEqual([
      `HTTPRoute ${INFRA}/invalid-reference-grant on Gateway ${INFRA}/same-namespace: RefNotPermitted: backendRef app-backend-v2: no ReferenceGrant in namespace ${APPS} lets HTTPRoutes of ${INFRA} refer to Service app-backend-v2 (their share of the traffic is answered 500)`,
    ]);
    expect(haproxyCheck(rendered.config, setup.dir)).toMatchObject({ ok: true });
    hx = await runHaproxy(rendered.config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all(Object.values(be).map((b) => b.close()));
    setup?.cleanup();
  });

  const ask = async (host: string, path: string, extra: Record<string, string> = {}, port = same, method = "GET") => {
    const r = await httpRequest(port, method, path, { host, ...extra });
    return r.status === 200 ? r.body.split(" ")[0]! : r.status;
  };
  const conditions = (name: string) =>
    status.httpRoutes
      .find((r) => r.name === name)!
      .parents.flatMap((p) => p.conditions.map((c) => `${p.parentRef.name} ${c.type} ${c.status} ${c.reason}`));

  it("routes a plain route to its backend (SimpleSameNamespace)", async () => {
    expect(await ask("simple.example", "/")).toBe("infra-backend-v1");
    expect(conditions("gateway-conformance-infra-test")).toEqual([
      "same-namespace Accepted True Accepted",
      "same-namespace ResolvedRefs True ResolvedRefs",
    ]);
  });

  it.each([
    ["/match/exact/one", "infra-backend-v3"],
    ["/match/exact", "infra-backend-v2"],
    ["/match", "infra-backend-v1"],
    ["/match/prefix/one/any", "infra-backend-v2"],
    ["/match/prefix/any", "infra-backend-v1"],
    ["/match/any", "infra-backend-v3"],
  ])("%s goes to %s (PathMatchOrder)", async (path, expected) => {
    expect(await ask("order.example", path)).toBe(expected);
  });

  it.each([
    [{ Version: "one" }, "infra-backend-v1"],
    [{ Version: "two" }, "infra-backend-v2"],
    [{ Version: "two", Color: "orange" }, "infra-backend-v1"],
    [{ Version: "two", Color: "blue" }, "infra-backend-v2"],
    [{ Color: "orange" }, 404],
    [{ "Some-Other-Header": "one" }, 404],
    [{ Color: "blue" }, "infra-backend-v1"],
    [{ Color: "green" }, "infra-backend-v1"],
    [{ Color: "red" }, "infra-backend-v2"],
    [{ Color: "yellow" }, "infra-backend-v2"],
    [{ Color: "purple" }, 404],
  ])("headers %j: %s (HeaderMatching)", async (extra, expected) => {
    expect(await ask("headers.example", "/", extra)).toBe(expected);
  });

  it.each([
    ["/", {}, "infra-backend-v1"],
    ["/example", {}, "infra-backend-v1"],
    ["/", { Version: "one" }, "infra-backend-v1"],
    ["/v2", {}, "infra-backend-v2"],
    ["/v2/example", {}, "infra-backend-v2"],
    ["/", { Version: "two" }, "infra-backend-v2"],
    ["/v2/", {}, "infra-backend-v2"],
    ["/v2example", {}, "infra-backend-v1"],
    ["/foo/v2/example", {}, "infra-backend-v1"],
  ])("%s %j goes to %s (Matching)", async (path, extra, expected) => {
    expect(await ask("matching.example", path, extra)).toBe(expected);
  });

  it.each(["manual-endpointslices", "headless", "headless-manual-endpointslices"])(
    "reaches a Service of kind %s, an IPv6 slice without endpoints beside (ServiceTypes)",
    async (name) => {
      expect(await ask("types.example", `/${name}`)).toBe(name);
    },
  );

  it("answers 500 for the share a missing ReferenceGrant leaves, and serves its valid sibling (PartiallyInvalidViaInvalidReferenceGrant)", async () => {
    expect(conditions("invalid-reference-grant")).toEqual([
      "same-namespace Accepted True Accepted",
      "same-namespace ResolvedRefs False RefNotPermitted",
    ]);
    expect(await ask("partial.example", "/v2")).toBe(500);
    expect(await ask("partial.example", "/")).toBe("app-backend-v1");
  });

  it("redirects with 303 to the same path (303Redirect)", async () => {
    const r = await httpRequest(same, "POST", "/see-other", { host: "redirect.example" });
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe(`http://redirect.example:${same}/see-other`);
  });

  it("answers 500 for a rule with no backendRefs", async () => {
    expect(await ask("empty.example", "/anything")).toBe(500);
  });

  it("serves a route shared by two Gateways on both, and each Gateway's own route on its own (MultipleGateways)", async () => {
    expect(await ask("multi.example", "/shared", {}, same)).toBe("infra-backend-v1");
    expect(await ask("multi.example", "/", {}, same)).toBe("infra-backend-v2");
    expect(await ask("multi.example", "/shared", {}, all)).toBe("infra-backend-v1");
    expect(await ask("multi.example", "/", {}, all)).toBe("infra-backend-v3");
    expect(conditions("multiple-gateways-shared-route")).toEqual([
      "same-namespace Accepted True Accepted",
      "same-namespace ResolvedRefs True ResolvedRefs",
      "all-namespaces Accepted True Accepted",
      "all-namespaces ResolvedRefs True ResolvedRefs",
    ]);
  });
});
