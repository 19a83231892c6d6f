import { describe, expect, it } from "vitest";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import type { Model } from "../../../../shared/core/model/model.js";
import { parseRenderOptions, type RenderOptionsInput } from "../../../../shared/core/settings/options.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import {
  MAX_PORT_ENDPOINTS,
  MAX_SERVICE_PORTS,
  MAX_SERVICE_SLOTS,
} from "../../../../shared/core/model/service-caps.js";
import { slotName } from "../../../../shared/core/model/slots.js";
import { list, service, slice, wideService } from "../../../support/fixtures.js";

function build(items: unknown[], options: RenderOptionsInput = {}): Model {
  return buildModel(snapshotFromDocuments([list(items)]), parseRenderOptions(options));
}

const web = (name = "web", ns = "default", extra: Parameters<typeof service>[2] = {}) => [
  service(name, [{ port: 80, name: "http", targetPort: "http" }], { namespace: ns, ...extra }),
  slice(name, [{ name: "http", port: 8080 }], ["10.0.0.1", "10.0.0.2"], { namespace: ns }),
];

function routes(m: Model): string[] {
  return m.httpRoutes.map(
    (r) =>
      `${r.match.kind === "host" ? `host:${r.match.host.wildcard ? "*." : ""}${r.match.host.name}` : `path:${r.match.prefix}`} -> ${r.action === "route" ? r.backend : "https"}`,
  );
}

function liveAddresses(m: Model, backend: string): string[] {
  return m.backends
    .find((b) => b.name === backend)!
    .servers.flatMap((address) => (address ? [address] : []))
    .sort();
}

describe("paths and names", () => {
  it.each([
    ["default", 80, "/web"],
    ["default", 8080, "/web:8080"],
    ["shop", 80, "/shop/web"],
    ["shop", 9000, "/shop/web:9000"],
  ])("namespace %s port %i routes at %s", (ns, port, prefix) => {
    const m = build([
      service("web", [{ port, name: "p" }], { namespace: ns }),
      slice("web", [{ name: "p", port: 1234 }], ["10.0.0.1"], { namespace: ns }),
    ]);
    expect(routes(m)).toEqual([`path:${prefix} -> ${ns}_web_${port}`]);
    expect(m.backends[0]!.strip).toEqual({ prefix, unlessHost: null });
  });

  it("gives same-named Services in two namespaces distinct backends", () => {
    const m = build([...web("api", "a"), ...web("api", "b")]);
    expect(m.backends.map((b) => b.name)).toEqual(["a_api_80", "b_api_80"]);
  });

  it("orders path rules longest first so /svc:8080 is not shadowed by /svc", () => {
    const m = build([
      service("svc", [
        { port: 80, name: "a" },
        { port: 8080, name: "b" },
      ]),
      slice(
        "svc",
        [
          { name: "a", port: 80 },
          { name: "b", port: 8080 },
        ],
        ["10.0.0.1"],
      ),
      ...web("foo"),
      ...web("foobar"),
    ]);
    expect(routes(m)).toEqual([
      "path:/svc:8080 -> default_svc_8080",
      "path:/foobar -> default_foobar_80",
      "path:/foo -> default_foo_80",
      "path:/svc -> default_svc_80",
    ]);
  });
});

describe("endpoints", () => {
  it("resolves a named targetPort through the slice port named after the Service port", () => {
    const m = build(web());
    expect(liveAddresses(m, "default_web_80")).toEqual(["10.0.0.1:8080", "10.0.0.2:8080"]);
  });

  it("ignores endpoints that are not ready", () => {
    const m = build([
      service("web", [{ port: 80 }]),
      slice("web", [{ port: 8080 }], ["10.0.0.1", { ip: "10.0.0.2", ready: false }]),
    ]);
    expect(liveAddresses(m, "default_web_80")).toEqual(["10.0.0.1:8080"]);
  });

  it("merges several slices and brackets IPv6", () => {
    const m = build([
      service("web", [{ port: 80 }]),
      slice("web", [{ port: 8080 }], ["10.0.0.1"], { name: "a" }),
      slice("web", [{ port: 8080 }], ["fd00::1"], { name: "b", addressType: "IPv6" }),
    ]);
    expect(liveAddresses(m, "default_web_80")).toEqual(["10.0.0.1:8080", "[fd00::1]:8080"]);
  });

  it("falls back to v1 Endpoints only when the Service has no slices", () => {
    const endpoints = {
      kind: "Endpoints",
      apiVersion: "v1",
      metadata: { name: "web", namespace: "default" },
      subsets: [{ addresses: [{ ip: "10.1.1.1" }], ports: [{ name: "http", port: 9090 }] }],
    };
    expect(liveAddresses(build([service("web", [{ port: 80, name: "http" }]), endpoints]), "default_web_80")).toEqual([
      "10.1.1.1:9090",
    ]);
    const both = build([
      service("web", [{ port: 80, name: "http" }]),
      endpoints,
      slice("web", [{ name: "http", port: 8080 }], ["10.0.0.9"]),
    ]);
    expect(liveAddresses(both, "default_web_80")).toEqual(["10.0.0.9:8080"]);
  });

  it("forward-services balances to the ClusterIP and skips headless Services", () => {
    const m = build([...web(), service("headless", [{ port: 80 }], { clusterIP: "None" })], { forwardServices: true });
    expect(liveAddresses(m, "default_web_80")).toEqual(["10.96.0.1:80"]);
    expect(m.skipped).toContainEqual({
      service: "default/headless",
      port: 80,
      reason: expect.stringContaining("headless"),
    });
  });

  it("keeps each endpoint in its slot when others come and go", () => {
    const slotOf = (m: Model) =>
      new Map(m.backends[0]!.servers.flatMap((address, i) => (address ? [[address, slotName(i)]] : [])));
    const ips = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
    const before = slotOf(build([service("web", [{ port: 80 }]), slice("web", [{ port: 80 }], ips)]));
    const after = slotOf(
      build([service("web", [{ port: 80 }]), slice("web", [{ port: 80 }], ["10.0.0.4", ...ips.slice(1)].reverse())]),
    );
    for (const ip of ["10.0.0.2:80", "10.0.0.3:80"]) expect(after.get(ip)).toBe(before.get(ip));
    expect(
      build([service("web", [{ port: 80 }]), slice("web", [{ port: 80 }], ips)]).backends[0]!.servers,
    ).toHaveLength(4);
  });
});

describe("exposure", () => {
  it.each([
    [service("lb", [{ port: 80 }], { type: "LoadBalancer" }), "LoadBalancer"],
    [service("ext", [{ port: 80 }], { type: "ExternalName" }), "ExternalName"],
    [service("dns", [{ port: 53, protocol: "UDP" }]), "UDP"],
    [service("kubernetes", [{ port: 443 }]), "system"],
    [service("kube-dns", [{ port: 53 }], { namespace: "kube-system" }), "system"],
  ])("skips %# with a reason", (svc, reason) => {
    const m = build([svc]);
    expect(m.backends).toEqual([]);
    expect(m.skipped[0]!.reason).toContain(reason);
  });

  it("keeps a Service with no ready endpoint, every slot free: it answers 503 and scales back up without a reload", () => {
    const m = build([service("empty", [{ port: 80 }])]);
    expect(m.skipped).toEqual([]);
    expect(m.backends.map((b) => [b.name, b.servers])).toEqual([["default_empty_80", [null, null, null, null]]]);
    expect(m.httpRoutes.map((r) => r.backend)).toEqual(["default_empty_80"]);
  });

  it("exposes system Services when asked", () => {
    const m = build([service("kubernetes", [{ port: 443 }]), slice("kubernetes", [{ port: 6443 }], ["10.0.0.1"])], {
      exposeSystem: true,
    });
    expect(m.backends.map((b) => b.name)).toEqual(["default_kubernetes_443"]);
  });

  it("--selector, --target-service and --namespace limit what is exposed", () => {
    const items = [
      ...web("a", "default", { labels: { expose: "yes" } }),
      ...web("b"),
      ...web("a", "other", { labels: { expose: "yes" } }),
    ];
    expect(build(items, { selector: "expose=yes" }).backends.map((b) => b.name)).toEqual([
      "default_a_80",
      "other_a_80",
    ]);
    expect(build(items, { targetService: "a" }).backends.map((b) => b.name)).toEqual(["default_a_80", "other_a_80"]);
    expect(build(items, { targetService: "other/a" }).backends.map((b) => b.name)).toEqual(["other_a_80"]);
    expect(build(items, { namespace: "other" }).backends.map((b) => b.name)).toEqual(["other_a_80"]);
  });
});

describe("annotations", () => {
  const ann = (a: Record<string, string>) => build(web("web", "default", { annotations: a }));

  it("routes by host before any path, and does not strip the prefix for host-routed requests", () => {
    const m = build([
      ...web("web", "default", { annotations: { "serviceloadbalancer/lb.host": "WWW.Example.com" } }),
      ...web("zzzzzzzzzzzzzzzz"),
    ]);
    expect(routes(m)[0]).toBe("host:www.example.com -> default_web_80");
    expect(m.backends[0]!.strip).toEqual({ prefix: "/web", unlessHost: { name: "www.example.com", wildcard: false } });
  });

  it("orders exact hosts before wildcards", () => {
    const m = build([
      ...web("a", "default", { annotations: { "serviceloadbalancer/lb.host": "*.example.com" } }),
      ...web("b", "default", { annotations: { "serviceloadbalancer/lb.host": "api.example.com" } }),
    ]);
    expect(routes(m).slice(0, 2)).toEqual([
      "host:api.example.com -> default_b_80",
      "host:*.example.com -> default_a_80",
    ]);
  });

  it("aclMatch sets the path prefix and keeps the path unchanged", () => {
    const m = ann({ "serviceloadbalancer/lb.aclMatch": "/api/v1/" });
    expect(routes(m)).toEqual(["path:/api/v1 -> default_web_80"]);
    expect(m.backends[0]!.strip).toBeNull();
  });

  it.each([
    ["lb.host", "evil.com\n    server x 1.2.3.4:80"],
    ["lb.host", "a.com b.com"],
    ["lb.host", "-i foo"],
    ["lb.aclMatch", "-i /test"],
    ["lb.aclMatch", "/a#b"],
    ["lb.aclMatch", "/a b"],
    ["lb.aclMatch", '/a"b'],
    ["lb.algorithm", "roundrobin\n    option x"],
    ["lb.algorithm", "uri"],
    ["lb.sslTerm", "yes please"],
    ["lb.cookie-sticky-session", "1 "],
  ])("rejects %s=%j with a warning naming the Service", (key, value) => {
    const m = ann({ [`serviceloadbalancer/${key}`]: value });
    expect(m.warnings).toEqual([
      expect.objectContaining({ service: "default/web", annotation: `serviceloadbalancer/${key}` }),
    ]);
    expect(m.backends[0]!.algorithm).toBe("roundrobin");
    expect(routes(m)).toEqual(["path:/web -> default_web_80"]);
  });

  it("warns of a serviceloadbalancer/ key it does not read, with the nearest it reads, and routes as without it", () => {
    const m = ann({
      "serviceloadbalancer/lb.hots": "api.example.com",
      "serviceloadbalancer/lb.sslterm": "true",
      "serviceloadbalancer/something-else-entirely": "x",
      "example.com/lb.hots": "not ours",
    });
    expect(m.warnings).toEqual([
      {
        service: "default/web",
        annotation: "serviceloadbalancer/lb.hots",
        message: "not an annotation servicelb reads; ignored (did you mean serviceloadbalancer/lb.host?)",
      },
      {
        service: "default/web",
        annotation: "serviceloadbalancer/lb.sslterm",
        message: "not an annotation servicelb reads; ignored (did you mean serviceloadbalancer/lb.sslTerm?)",
      },
      {
        service: "default/web",
        annotation: "serviceloadbalancer/something-else-entirely",
        message: "not an annotation servicelb reads; ignored (docs/annotations.md lists them)",
      },
    ]);
    expect(routes(m)).toEqual(["path:/web -> default_web_80"]);
    // Annotations it reads, of either kind (routing, backend settings), do not.
    const known = ann({
      "serviceloadbalancer/lb.timeout-server": "30s",
      "serviceloadbalancer/lb.host": "a.example.com",
    });
    expect(known.warnings).toEqual([]);
  });

  it("affinity is on only for sessionAffinity ClientIP, with its timeout", () => {
    expect(build(web()).backends[0]!.affinity).toEqual({ kind: "none" });
    expect(build(web("web", "default", { sessionAffinity: "ClientIP" })).backends[0]!.affinity).toEqual({
      kind: "source",
      timeoutSeconds: 10800,
    });
  });

  it("cookie stickiness gives each endpoint a cookie derived from its address", () => {
    const cookies = (ips: string[]) => {
      const { servers, cookies } = build([
        service("web", [{ port: 80 }], { annotations: { "serviceloadbalancer/lb.cookie-sticky-session": "true" } }),
        slice("web", [{ port: 80 }], ips),
      ]).backends[0]!;
      return new Map(servers.flatMap((address, i) => (address ? [[address, cookies![i]]] : [])));
    };
    const a = cookies(["10.0.0.1", "10.0.0.2"]);
    const b = cookies(["10.0.0.9", "10.0.0.2", "10.0.0.1"]);
    expect(a.get("10.0.0.1:80")).toMatch(/^[0-9a-f]{8}$/);
    expect(b.get("10.0.0.1:80")).toBe(a.get("10.0.0.1:80"));
    expect(b.get("10.0.0.2:80")).toBe(a.get("10.0.0.2:80"));
  });

  it("the algorithm annotation overrides --balance-algorithm", () => {
    expect(ann({ "serviceloadbalancer/lb.algorithm": "leastconn" }).backends[0]!.algorithm).toBe("leastconn");
    expect(build(web(), { balanceAlgorithm: "source" }).backends[0]!.algorithm).toBe("source");
  });

  it("sslTerm without --ssl-cert is not served in clear text", () => {
    const m = ann({ "serviceloadbalancer/lb.sslTerm": "true" });
    expect(m.backends).toEqual([]);
    expect(m.skipped[0]!.reason).toContain("--ssl-cert");
  });

  it("sslTerm with a certificate routes on HTTPS and redirects plain HTTP", () => {
    const m = buildModel(
      snapshotFromDocuments([
        list(web("web", "default", { annotations: { "serviceloadbalancer/lb.sslTerm": "True" } })),
      ]),
      parseRenderOptions({ sslCert: "/etc/ssl/lb.pem" }),
    );
    expect(routes(m)).toEqual(["path:/web -> https"]);
    expect(m.httpsRoutes).toEqual([
      { backend: "default_web_80", match: { kind: "path", prefix: "/web" }, action: "route" },
    ]);
  });
});

describe("TCP services", () => {
  const mysql = (ns = "default") => [
    service("mysql", [{ port: 3306 }], { namespace: ns }),
    slice("mysql", [{ port: 3306 }], ["10.0.0.5"], { namespace: ns }),
  ];

  it("gets its own frontend on the service port; the name is resolved in the default namespace", () => {
    const m = build([...mysql(), ...mysql("other")], { tcpServices: "mysql:3306" });
    expect(m.tcpFrontends).toEqual([
      { name: "tcp_default_mysql_3306", port: 3306, backend: "default_mysql_3306", timeoutClient: null },
    ]);
    expect(m.backends.find((b) => b.name === "other_mysql_3306")!.mode).toBe("http");
  });

  it("skips the later of two Services claiming one port, and ports the frontends use", () => {
    const m = build([...mysql(), ...mysql("other"), ...web("stats")], {
      tcpServices: "mysql:3306,other/mysql:3306,stats:80",
    });
    expect(m.tcpFrontends.map((t) => t.backend)).toEqual(["default_mysql_3306"]);
    expect(m.warnings.map((w) => w.service).sort()).toEqual(["default/stats", "other/mysql"]);
  });
});

describe("route ownership across namespaces", () => {
  const HOST = "serviceloadbalancer/lb.host";
  const ACL = "serviceloadbalancer/lb.aclMatch";
  const OLD = "2024-01-01T00:00:00Z";
  const NEW = "2025-06-01T12:00:00Z";
  const claim = (name: string, ns: string, created: string | undefined, annotations: Record<string, string>) =>
    web(name, ns, { created, annotations });
  const ownership = (m: Model) =>
    m.warnings.map((w) => ({ service: w.service, annotation: w.annotation, owner: w.owner }));

  it("the oldest claim keeps a host, whatever the names: a newcomer never displaces the owner", () => {
    const m = build([
      ...claim("aaa", "aaa", NEW, { [HOST]: "api.example.com" }),
      ...claim("api", "shop", OLD, { [HOST]: "api.example.com" }),
    ]);
    expect(routes(m)).toEqual([
      "host:api.example.com -> shop_api_80",
      "path:/shop/api -> shop_api_80",
      "path:/aaa/aaa -> aaa_aaa_80",
    ]);
    expect(ownership(m)).toEqual([{ service: "aaa/aaa", annotation: HOST, owner: "shop/api" }]);
    expect(m.warnings[0]!.message).toBe(
      "host api.example.com belongs to shop/api, whose claim is older (oldest claim wins: creationTimestamp, then namespace/name); ignored, the Service keeps /aaa/aaa",
    );
    // The loser is still served at its own path, prefix stripped as usual.
    expect(m.backends.find((b) => b.name === "aaa_aaa_80")!.strip).toEqual({ prefix: "/aaa/aaa", unlessHost: null });
  });

  it("a Service whose creationTimestamp is no time at all is refused, and takes no claim as the oldest", () => {
    const m = build([
      ...claim("api", "shop", OLD, { [HOST]: "api.example.com" }),
      ...claim("evil", "evil", "2019-13-45T25:61:61Z", { [HOST]: "api.example.com" }),
    ]);
    expect(routes(m)).toEqual(["host:api.example.com -> shop_api_80", "path:/shop/api -> shop_api_80"]);
    expect(m.warnings).toContainEqual(
      expect.objectContaining({ message: expect.stringMatching(/evil\/evil.*creationTimestamp.*month out of range/) }),
    );
  });

  it("settles claims of the same age, and claims of objects without a creationTimestamp, by namespace/name", () => {
    const same = build([
      ...claim("b", "default", OLD, { [HOST]: "same.example.com" }),
      ...claim("a", "default", OLD, { [HOST]: "same.example.com" }),
    ]);
    expect(ownership(same)).toEqual([{ service: "default/b", annotation: HOST, owner: "default/a" }]);
    const unknownAge = build([
      ...claim("a", "default", undefined, { [HOST]: "same.example.com" }),
      ...claim("b", "default", NEW, { [HOST]: "same.example.com" }),
    ]);
    expect(ownership(unknownAge)).toEqual([{ service: "default/a", annotation: HOST, owner: "default/b" }]);
  });

  it("a Service that loses its custom path keeps its own path instead of being dropped", () => {
    const m = build([...claim("a", "team-a", OLD, { [ACL]: "/api" }), ...claim("b", "team-b", NEW, { [ACL]: "/api" })]);
    expect(routes(m)).toEqual(["path:/team-b/b -> team-b_b_80", "path:/api -> team-a_a_80"]);
    expect(m.skipped).toEqual([]);
    expect(ownership(m)).toEqual([{ service: "team-b/b", annotation: ACL, owner: "team-a/a" }]);
    expect(m.backends.map((b) => [b.name, b.strip?.prefix ?? null])).toEqual([
      ["team-a_a_80", null],
      ["team-b_b_80", "/team-b/b"],
    ]);
  });

  it.each([
    [
      "another namespace's path space",
      "aaa",
      "/shop/api",
      "shop/*",
      "path /shop/api lies in namespace shop's path space /shop/",
    ],
    [
      "another namespace's path space, even where nothing is routed yet",
      "aaa",
      "/shop/next",
      "shop/*",
      "path /shop/next lies in namespace shop's path space /shop/",
    ],
    [
      "the path space of a namespace, from default",
      "default",
      "/shop",
      "shop/*",
      "path /shop lies in namespace shop's path space /shop/",
    ],
    ["a default Service's own path", "aaa", "/web", "default/web", "path /web lies in default/web's own path /web"],
    [
      "a path below a default Service's own path",
      "aaa",
      "/web/admin",
      "default/web",
      "path /web/admin lies in default/web's own path /web",
    ],
    [
      "a path below a default Service's own path of another port",
      "default",
      "/web:8080/x",
      "default/web",
      "path /web:8080/x lies in default/web's own path /web:8080",
    ],
    [
      "another Service's own path in its own namespace",
      "shop",
      "/shop/api/v2",
      "shop/api",
      "path /shop/api/v2 lies in shop/api's own path /shop/api",
    ],
  ])("lb.aclMatch may not claim %s", (_, ns, prefix, owner, reason) => {
    const m = build([
      service(
        "web",
        [
          { port: 80, name: "http" },
          { port: 8080, name: "alt" },
        ],
        { created: NEW },
      ),
      ...claim("api", "shop", NEW, {}),
      ...claim("intruder", ns, OLD, { [ACL]: prefix }),
    ]);
    const intruder = `${ns === "default" ? "" : `/${ns}`}/intruder`;
    expect(routes(m).filter((r) => r.includes("intruder"))).toEqual([`path:${intruder} -> ${ns}_intruder_80`]);
    expect(m.warnings).toEqual([
      {
        service: `${ns}/intruder`,
        port: 80,
        annotation: ACL,
        owner,
        message: `${reason} (oldest claim wins: creationTimestamp, then namespace/name); ignored, the Service keeps ${intruder}`,
      },
    ]);
  });

  it("lb.aclMatch may claim its own namespace's space and the shared space", () => {
    const m = build([
      ...claim("api", "shop", NEW, { [ACL]: "/shop/v2" }),
      ...claim("x", "team-a", NEW, { [ACL]: "/docs" }),
    ]);
    expect(m.warnings).toEqual([]);
    expect(routes(m)).toEqual(["path:/shop/v2 -> shop_api_80", "path:/docs -> team-a_x_80"]);
  });

  it("a namespace's space is its own only while it is older than a default Service of its name", () => {
    const older = build([...claim("shop", "default", NEW, {}), ...claim("api", "shop", OLD, { [ACL]: "/shop/v2" })]);
    expect(routes(older)).toEqual(["path:/shop/v2 -> shop_api_80"]);
    expect(ownership(older)).toEqual([{ service: "default/shop", annotation: undefined, owner: "shop/*" }]);
    const newer = build([...claim("shop", "default", OLD, {}), ...claim("api", "shop", NEW, { [ACL]: "/shop/v2" })]);
    expect(routes(newer)).toEqual(["path:/shop -> default_shop_80"]);
    expect(ownership(newer)).toEqual([
      { service: "shop/api", annotation: undefined, owner: "default/shop" },
      { service: "shop/api", annotation: ACL, owner: "default/shop" },
    ]);
    expect(newer.warnings[1]!.message).toBe(
      "path /shop/v2 lies in default/shop's own path /shop (oldest claim wins: creationTimestamp, then namespace/name); ignored, the port has no route left and is skipped",
    );
  });

  it("a wildcard never takes an exact host: they are different claims, and the exact host is matched first", () => {
    const m = build([
      ...claim("api", "shop", NEW, { [HOST]: "api.example.com" }),
      ...claim("any", "aaa", OLD, { [HOST]: "*.example.com" }),
    ]);
    expect(m.warnings).toEqual([]);
    expect(routes(m).slice(0, 2)).toEqual(["host:api.example.com -> shop_api_80", "host:*.example.com -> aaa_any_80"]);
  });

  describe("--host-claims", () => {
    const hostClaims = { shop: ["shop.example.com", "*.shop.example.com"], "team-a": [] as string[] };

    it.each([
      ["shop", "shop.example.com", true],
      ["shop", "api.shop.example.com", true],
      ["shop", "*.api.shop.example.com", true],
      ["shop", "*.shop.example.com", true],
      ["shop", "example.com", false],
      ["shop", "*.example.com", false],
      ["shop", "evilshop.example.com", false],
      ["team-a", "shop.example.com", false],
      ["unlisted", "anything.example.com", false],
    ])("namespace %s may claim %s: %s", (ns, host, allowed) => {
      const m = build(claim("svc", ns, OLD, { [HOST]: host }), { hostClaims });
      expect(routes(m).some((r) => r.startsWith("host:"))).toBe(allowed);
      expect(routes(m)).toContain(`path:/${ns}/svc -> ${ns}_svc_80`);
      if (!allowed)
        expect(m.warnings).toEqual([
          expect.objectContaining({
            service: `${ns}/svc`,
            annotation: HOST,
            message: expect.stringContaining(`--host-claims allows namespace ${ns}`),
          }),
        ]);
    });
  });
});

describe("conflicts", () => {
  it("reports malformed items and keeps the rest", () => {
    const m = build([
      { kind: "Service", metadata: { name: "broken" }, spec: { ports: [{ port: "eighty" }] } },
      ...web(),
    ]);
    expect(m.backends.map((b) => b.name)).toEqual(["default_web_80"]);
    expect(m.warnings[0]!.message).toContain("broken");
  });
});

describe("caps per Service", () => {
  const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
  const pods = (n: number, prefix = "10.1") =>
    Array.from({ length: n }, (_, i) => `${prefix}.${Math.floor(i / 250)}.${(i % 250) + 1}`);
  const servedPorts = (m: Model, service: string) =>
    m.backends
      .filter((b) => b.service === service)
      .map((b) => b.servicePort)
      .sort((a, b) => a - b);

  it("serves 64 ports of a Service of 5,000, port 80 among them, and says so once; other Services are untouched", () => {
    const m = build([...wideService("wide", range(1, 5000), ["10.0.0.1"]), ...web()]);
    const served = servedPorts(m, "wide");
    expect(served).toHaveLength(MAX_SERVICE_PORTS);
    expect(served).toEqual([...range(1, 63), 80]);
    expect(m.warnings.filter((w) => w.service === "default/wide")).toEqual([
      {
        service: "default/wide",
        message:
          "4936 ports not served (64, 65, 66 … 5000): over the cap of 64 ports per Service, which serves its lowest ports and port 80",
      },
    ]);
    const capped = m.skipped.filter((s) => s.service === "default/wide");
    expect(capped).toHaveLength(5000 - MAX_SERVICE_PORTS);
    expect(capped[0]).toEqual({ service: "default/wide", port: 64, reason: "over the cap of 64 ports per Service" });
    expect(liveAddresses(m, "default_web_80")).toEqual(["10.0.0.1:8080", "10.0.0.2:8080"]);
    // The host claim rides on port 80, which stays served.
    const claimed = build(
      wideService("wide", range(1, 5000), ["10.0.0.1"], {
        annotations: { "serviceloadbalancer/lb.host": "wide.example.com" },
      }),
    );
    expect(routes(claimed)).toContain("host:wide.example.com -> default_wide_80");
  });

  it("serves the first 1,000 endpoints of a port by address", () => {
    const all = pods(1500);
    const m = build([
      service("big", [{ port: 80, name: "http" }]),
      slice("big", [{ name: "http", port: 8080 }], all.slice(0, 750), { name: "big-a" }),
      slice("big", [{ name: "http", port: 8080 }], all.slice(750), { name: "big-b" }),
    ]);
    const backend = m.backends.find((b) => b.name === "default_big_80")!;
    // One free slot beside them: the backend grows at runtime should more come (core/model/slots.ts).
    expect(backend.servers).toHaveLength(1001);
    const expected = all
      .map((ip) => `${ip}:8080`)
      .sort()
      .slice(0, MAX_PORT_ENDPOINTS);
    expect(liveAddresses(m, "default_big_80")).toEqual(expected.sort());
    expect(m.warnings).toEqual([
      {
        service: "default/big",
        port: 80,
        message: "1500 ready endpoints: the first 1000 by address are served, the cap per port",
      },
    ]);
  });

  it("serves ports while the Service's slots stay within 2,502, keeping room for port 80", () => {
    // Three ports of 1,000 endpoints take 1,001 slots each: two fit, port 80 one of them.
    const m = build(wideService("big", [10, 20, 80], pods(1000)));
    expect(servedPorts(m, "big")).toEqual([10, 80]);
    const total = m.backends.reduce((n, b) => n + b.servers.length, 0);
    expect(total).toBe(2002);
    expect(total + 1001).toBeGreaterThan(MAX_SERVICE_SLOTS);
    expect(m.skipped).toEqual([
      { service: "default/big", port: 20, reason: "over the cap of 2502 server slots per Service" },
    ]);
    expect(m.warnings).toEqual([
      {
        service: "default/big",
        message: "1 port not served (20): their server slots would take the Service over the cap of 2502 per Service",
      },
    ]);
  });
});
