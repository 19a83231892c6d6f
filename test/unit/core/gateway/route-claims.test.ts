import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { withGateway } from "../../../../shared/core/gateway/attach.js";
import { LayoutState } from "../../../../shared/core/model/layout-record.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import { hostWithin, type HostMatch } from "../../../../shared/core/model/host-match.js";
import type { Model } from "../../../../shared/core/model/model.js";
import { parseRenderOptions, type RenderOptionsInput } from "../../../../shared/core/settings/options.js";
import { type KubeFixture, list, service, slice } from "../../../support/fixtures.js";
import { gateway, gatewayClass, httpRoute, type ListenerSpec } from "../../../support/gateway-fixtures.js";

/*
 * A Gateway on --http-port that admits routes from every namespace, and tenants who each own
 * Services there: an HTTPRoute may not take what another namespace's Service holds, nor step past
 * --host-claims and --own-hosts (core/gateway/route-claims.ts).
 */

const HOST = "serviceloadbalancer/lb.host";
const OLD = "2024-01-01T00:00:00Z";
const NEW = "2025-01-01T00:00:00Z";

const tenant = (name: string, namespace: string, created: string, annotations?: Record<string, string>) => [
  service(name, [{ port: 80, name: "http" }], { namespace, created, annotations }),
  slice(name, [{ name: "http", port: 8080 }], ["10.0.0.1"], { name: `${name}-a`, namespace }),
];

const OPEN = { namespaces: { from: "All" } };
const infra = (listeners: ListenerSpec[] = [{ name: "http", port: 80, allowedRoutes: OPEN }]) => [
  gatewayClass(),
  gateway("gw", listeners, { namespace: "infra" }),
];

const routeIn = (namespace: string, created: string, spec: Record<string, unknown>) =>
  httpRoute("r", { parentRefs: [{ name: "gw", namespace: "infra" }], ...spec }, { namespace, created });

const toWeb = { backendRefs: [{ name: "web", port: 80 }] };

function render(items: KubeFixture[], options: RenderOptionsInput = {}): Model {
  const snapshot = snapshotFromDocuments([list(items)]);
  const model = buildModel(snapshot, parseRenderOptions({ httpPort: 80, ...options }));
  return withGateway(model, snapshot, true);
}

const accepted = (m: Model) =>
  m.gateway!.status.httpRoutes.flatMap((r) =>
    r.parents.flatMap((p) => p.conditions.filter((c) => c.type === "Accepted").map((c) => `${c.status} ${c.reason}`)),
  );
const acceptedMessage = (m: Model) =>
  m.gateway!.status.httpRoutes[0]!.parents[0]!.conditions.find((c) => c.type === "Accepted")!.message;
const served = (m: Model) => m.gateway!.frontends.flatMap((f) => f.entries.map((e) => `${f.port} ${e.route}`));
const hostRoutes = (m: Model) => m.httpRoutes.filter((r) => r.match.kind === "host").map((r) => r.backend);

describe("an HTTPRoute on --http-port against the Services' claims", () => {
  it("may not take a host that an older Service of another namespace claims: the Service keeps it", () => {
    const m = render([
      ...infra(),
      ...tenant("shop", "shop", OLD, { [HOST]: "shop.example.com" }),
      ...tenant("web", "evil", NEW),
      routeIn("evil", NEW, { hostnames: ["shop.example.com"], rules: [toWeb] }),
    ]);
    expect(accepted(m)).toEqual(["False NotAllowedByListeners"]);
    expect(acceptedMessage(m)).toBe(
      "listener http: shop.example.com on --http-port meets host shop.example.com, which Service shop/shop claims (lb.host) and is older",
    );
    expect(served(m)).toEqual([]);
    expect(hostRoutes(m)).toEqual(["shop_shop_80"]);
    expect(m.warnings.map((w) => w.message)).toContain(
      "HTTPRoute evil/r on Gateway infra/gw: NotAllowedByListeners: listener http: shop.example.com on --http-port meets host shop.example.com, which Service shop/shop claims (lb.host) and is older",
    );
  });

  it.each([
    ["a wildcard over it", ["*.example.com"]],
    ["any host", []],
  ])("may not take it by %s either", (_, hostnames) => {
    const m = render([
      ...infra(),
      ...tenant("shop", "shop", OLD, { [HOST]: "shop.example.com" }),
      ...tenant("web", "evil", NEW),
      routeIn("evil", NEW, { hostnames, rules: [toWeb] }),
    ]);
    expect(accepted(m)).toEqual(["False NotAllowedByListeners"]);
    expect(hostRoutes(m)).toEqual(["shop_shop_80"]);
  });

  it("keeps a host it held first: the newer Service's host route is withheld, with the route as its owner", () => {
    const m = render([
      ...infra(),
      ...tenant("shop", "shop", NEW, { [HOST]: "shop.example.com" }),
      ...tenant("web", "gw-team", OLD),
      routeIn("gw-team", OLD, { hostnames: ["shop.example.com"], rules: [toWeb] }),
    ]);
    expect(accepted(m)).toEqual(["True Accepted"]);
    expect(served(m)).toEqual(["80 gw-team/r"]);
    expect(hostRoutes(m)).toEqual([]);
    expect(m.warnings).toContainEqual({
      service: "shop/shop",
      annotation: HOST,
      owner: "HTTPRoute gw-team/r",
      message:
        "host shop.example.com is served on --http-port by HTTPRoute gw-team/r, which is older; not routed there",
    });
    // The Service keeps its own path.
    expect(m.httpRoutes.map((r) => r.match)).toContainEqual({ kind: "path", prefix: "/shop/shop" });
  });

  it("serves a host its own namespace's Service claims: one team, one decision", () => {
    const m = render([
      ...infra(),
      ...tenant("shop", "shop", OLD, { [HOST]: "shop.example.com" }),
      ...tenant("web", "shop", NEW),
      routeIn("shop", NEW, { hostnames: ["shop.example.com"], rules: [toWeb] }),
    ]);
    expect(accepted(m)).toEqual(["True Accepted"]);
    expect(hostRoutes(m)).toEqual(["shop_shop_80"]);
  });

  it("without a hostname, may not match a path another namespace's Service routes", () => {
    const m = render([
      ...infra(),
      ...tenant("shop", "shop", OLD),
      ...tenant("web", "evil", NEW),
      routeIn("evil", NEW, { rules: [{ matches: [{ path: { type: "PathPrefix", value: "/shop" } }], ...toWeb }] }),
    ]);
    expect(accepted(m)).toEqual(["False NotAllowedByListeners"]);
    expect(acceptedMessage(m)).toBe(
      "listener http: names no host, so on --http-port it answers on the load balancer's own names, where Service shop/shop routes /shop/shop (PathPrefix /shop meets it): give the route a hostname or a listener on a port of its own",
    );
  });

  it("without a hostname, serves paths no other namespace routes, and / where it has the port to itself", () => {
    const apart = render([
      ...infra(),
      ...tenant("shop", "shop", OLD),
      ...tenant("web", "evil", NEW),
      routeIn("evil", NEW, { rules: [{ matches: [{ path: { type: "PathPrefix", value: "/evil-api" } }], ...toWeb }] }),
    ]);
    expect(accepted(apart)).toEqual(["True Accepted"]);
    const alone = render([...infra(), ...tenant("web", "evil", NEW), routeIn("evil", NEW, { rules: [toWeb] })]);
    expect(accepted(alone)).toEqual(["True Accepted"]);
  });

  it.each([
    ["localhost", "always is"],
    ["lb.example.com", "in --own-hosts"],
    ["10.0.0.5", "the load balancer's own"],
  ])("may not name the load balancer's own name %s", (host, why) => {
    const m = render(
      [...infra(), ...tenant("web", "evil", NEW), routeIn("evil", NEW, { hostnames: [host], rules: [toWeb] })],
      { ownHosts: "lb.example.com" },
    );
    expect(accepted(m)).toEqual(["False NotAllowedByListeners"]);
    expect(acceptedMessage(m)).toContain(why);
  });

  it("may name the load balancer's own names on a listener port of its own, where no Service path answers", () => {
    const m = render([
      ...infra([{ name: "own", port: 8081, allowedRoutes: OPEN }]),
      ...tenant("shop", "shop", OLD),
      ...tenant("web", "evil", NEW),
      routeIn("evil", NEW, { hostnames: ["localhost"], rules: [toWeb] }),
    ]);
    expect(accepted(m)).toEqual(["True Accepted"]);
  });
});

describe("--host-claims on every listener port", () => {
  const hostClaims = { evil: ["*.evil.example"] };

  it.each([
    [80, ["api.evil.example"], "True Accepted"],
    [8081, ["api.evil.example"], "True Accepted"],
    [8081, ["shop.example.com"], "False NotAllowedByListeners"],
    [8081, ["api.evil.example", "shop.example.com"], "False NotAllowedByListeners"],
    [8081, [], "False NotAllowedByListeners"],
    [80, [], "False NotAllowedByListeners"],
  ])("port %d, hostnames %j: %s", (port, hostnames, verdict) => {
    const m = render(
      [
        ...infra([{ name: "http", port, allowedRoutes: OPEN }]),
        ...tenant("web", "evil", NEW),
        routeIn("evil", NEW, { hostnames, rules: [toWeb] }),
      ],
      { hostClaims },
    );
    expect(accepted(m)).toEqual([verdict]);
    if (verdict.startsWith("False"))
      expect(acceptedMessage(m)).toMatch(/--host-claims allows namespace evil only \*\.evil\.example/);
  });

  it("a listener's hostname narrows a route that names none to what the namespace may claim", () => {
    const m = render(
      [
        ...infra([{ name: "http", port: 8081, hostname: "api.evil.example", allowedRoutes: OPEN }]),
        ...tenant("web", "evil", NEW),
        routeIn("evil", NEW, { rules: [toWeb] }),
      ],
      { hostClaims },
    );
    expect(accepted(m)).toEqual(["True Accepted"]);
  });
});

describe("a Service held in a spare backend", () => {
  it("claims its host as its own: the spare's route is still the Service's", () => {
    const renderer = new Renderer(loadTemplates());
    const options = parseRenderOptions({ httpPort: 80 });
    const before = [
      ...infra(),
      ...tenant("web", "evil", NEW),
      routeIn("evil", NEW, { hostnames: ["shop.example.com"], rules: [toWeb] }),
    ];
    const first = renderSnapshot(snapshotFromDocuments([list(before)]), options, renderer);
    const shop = tenant("shop", "shop", OLD, { [HOST]: "shop.example.com" });
    const second = renderSnapshot(
      snapshotFromDocuments([list([...before, ...shop])]),
      options,
      renderer,
      {},
      undefined,
      undefined,
      new LayoutState(first.layout),
    );
    expect(second.layoutFresh).toBeNull();
    expect(second.layout!.spares.find((sp) => sp.holds === "shop_shop_80")).toBeDefined();
    expect(second.warnings.filter((w) => w.owner?.startsWith("HTTPRoute"))).toEqual([]);
    expect(second.gatewayStatus!.httpRoutes[0]!.parents[0]!.conditions[0]).toMatchObject({
      status: "False",
      reason: "NotAllowedByListeners",
    });
  });
});

describe("any mix of tenants' Services and routes on --http-port", () => {
  const NAMESPACES = ["a", "b", "c"];
  const HOSTS = ["shop.example.com", "api.example.com", "*.example.com", "x.api.example.com"];
  const PATHS = ["/", "/a", "/b/x", "/shop", "/c"];
  const when = (day: number) => `2024-01-${String(day).padStart(2, "0")}T00:00:00Z`;
  const arbService = fc.record({
    namespace: fc.constantFrom(...NAMESPACES),
    host: fc.option(fc.constantFrom(...HOSTS), { nil: undefined }),
    day: fc.integer({ min: 1, max: 28 }),
  });
  const arbRoute = fc.record({
    namespace: fc.constantFrom(...NAMESPACES),
    hostnames: fc.subarray(HOSTS, { maxLength: 2 }),
    path: fc.constantFrom(...PATHS),
    day: fc.integer({ min: 1, max: 28 }),
  });
  const meet = (a: HostMatch, b: HostMatch) => hostWithin(a, b) || hostWithin(b, a);

  it("never leaves a route of one namespace and a host or path of another's Service both served where they meet", () => {
    fc.assert(
      fc.property(
        fc.array(arbService, { minLength: 1, maxLength: 5 }),
        fc.array(arbRoute, { minLength: 1, maxLength: 4 }),
        (services, routes) => {
          const items: KubeFixture[] = [...infra()];
          for (const [i, svc] of services.entries())
            items.push(...tenant(`s${i}`, svc.namespace, when(svc.day), svc.host ? { [HOST]: svc.host } : undefined));
          for (const ns of NAMESPACES) items.push(...tenant("web", ns, when(28)));
          for (const [i, r] of routes.entries())
            items.push(
              httpRoute(
                `r${i}`,
                {
                  parentRefs: [{ name: "gw", namespace: "infra" }],
                  hostnames: r.hostnames,
                  rules: [{ matches: [{ path: { type: "PathPrefix", value: r.path } }], ...toWeb }],
                },
                { namespace: r.namespace, created: when(r.day) },
              ),
            );
          const m = render(items);
          const nsOf = new Map(m.backends.map((b) => [b.name, b.namespace]));
          const entries = m.gateway!.frontends.filter((f) => f.port === 80).flatMap((f) => f.entries);
          for (const e of entries) {
            const ns = e.route.split("/")[0]!;
            for (const r of m.httpRoutes) {
              if (nsOf.get(r.backend) === ns) continue;
              if (r.match.kind === "host") expect(e.host === null || !meet(e.host, r.match.host)).toBe(true);
              else if (e.host === null) {
                const prefix = r.match.prefix;
                expect(e.path.value.startsWith(prefix) || prefix.startsWith(e.path.value)).toBe(false);
              }
            }
          }
          // A Service's host goes to a route only when the route is the older.
          for (const w of m.warnings.filter((x) => x.owner?.startsWith("HTTPRoute "))) {
            const route = routes[Number(w.owner!.split("/r")[1])]!;
            const svc = services[Number(w.service.split("/s")[1])]!;
            expect(route.day < svc.day || (route.day === svc.day && route.namespace < svc.namespace)).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
