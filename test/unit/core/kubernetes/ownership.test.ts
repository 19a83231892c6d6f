import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import type { Model } from "../../../../shared/core/model/model.js";
import { parseRenderOptions, type RenderOptionsInput } from "../../../../shared/core/settings/options.js";
import { ROUTE_MAPS, routeMapLines } from "../../../../shared/core/haproxy-config/route-maps.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";

const HOST = "serviceloadbalancer/lb.host";
const ACL = "serviceloadbalancer/lb.aclMatch";
const OLD = "2024-01-01T00:00:00Z";
const MID = "2024-06-01T00:00:00Z";
const NEW = "2025-06-01T12:00:00Z";

function build(items: unknown[], options: RenderOptionsInput = {}): Model {
  return buildModel(snapshotFromDocuments([list(items)]), parseRenderOptions(options));
}

/** A Service with one endpoint on each of `ports` (80 by default). */
function svc(
  ns: string,
  name: string,
  created: string | undefined,
  annotations: Record<string, string> = {},
  ports: number[] = [80],
) {
  return [
    service(
      name,
      ports.map((port) => ({ port, name: `p${port}` })),
      { namespace: ns, created, annotations },
    ),
    slice(
      name,
      ports.map((port) => ({ name: `p${port}`, port: 8000 + (port % 1000) })),
      ["10.0.0.1"],
      { namespace: ns },
    ),
  ];
}

function routes(m: Model): string[] {
  return m.httpRoutes.map(
    (r) =>
      `${r.match.kind === "host" ? `host:${r.match.host.wildcard ? "*." : ""}${r.match.host.name}` : `path:${r.match.prefix}`} -> ${r.backend}`,
  );
}

const claims = (m: Model) => m.warnings.map((w) => ({ service: w.service, annotation: w.annotation, owner: w.owner }));

function pathsMap(m: Model): string[] {
  return routeMapLines(m.httpRoutes, () => "redirect").get("maps/http.paths.map")!;
}

describe("lb.host: the load balancer's own names are never claimed", () => {
  it.each([
    ["127.0.0.1", "an IPv4 address"],
    ["10.0.0.5", "an IPv4 address"],
    ["127.1", "a short IPv4 form, which browsers read as 127.0.0.1"],
    ["2130706433", "a number, which browsers read as an IPv4 address"],
    ["0x7f.0.0.1", "a hexadecimal IPv4 form"],
    ["*.0.0.1", "a wildcard that only names IPv4 addresses"],
    ["localhost", "localhost"],
    ["api.localhost", "a name under localhost"],
    ["*.a.localhost", "a wildcard under localhost"],
  ])("refuses %s (%s) with a warning, and path routes keep answering there", (host, _) => {
    const m = build([...svc("default", "roll", OLD), ...svc("evil", "x", OLD, { [HOST]: host })]);
    expect(routes(m)).toEqual(["path:/evil/x -> evil_x_80", "path:/roll -> default_roll_80"]);
    expect(claims(m)).toEqual([{ service: "evil/x", annotation: HOST, owner: "--own-hosts" }]);
    expect(m.warnings[0]!.message).toMatch(/load balancer's own/);
  });

  it.each(["::1", "[::1]", "[::1]:80", "::ffff:127.0.0.1", "fe80::1"])(
    "refuses the IPv6 literal %s: it is not a host name",
    (host) => {
      const m = build(svc("evil", "x", OLD, { [HOST]: host }));
      expect(routes(m)).toEqual(["path:/evil/x -> evil_x_80"]);
      expect(m.warnings).toEqual([
        expect.objectContaining({ service: "evil/x", annotation: HOST, message: expect.stringContaining("ignored") }),
      ]);
    },
  );

  it.each([
    ["lb.example.com", "lb.example.com"],
    ["LB.Example.com", "lb.example.com"],
    ["*.example.com", "a wildcard over lb.example.com"],
    ["n1.nodes.example.com", "a name under *.nodes.example.com"],
    ["*.nodes.example.com", "the wildcard itself"],
    ["*.a.nodes.example.com", "a wildcard under *.nodes.example.com"],
  ])("refuses %s with --own-hosts lb.example.com,*.nodes.example.com (%s)", (host) => {
    const m = build(svc("evil", "x", OLD, { [HOST]: host }), { ownHosts: "lb.example.com,*.nodes.example.com" });
    expect(routes(m)).toEqual(["path:/evil/x -> evil_x_80"]);
    expect(claims(m)).toEqual([{ service: "evil/x", annotation: HOST, owner: "--own-hosts" }]);
  });

  it.each(["api.example.com", "nodes.example.com", "*.api.example.com", "example.org"])(
    "lets %s be claimed beside --own-hosts lb.example.com,*.nodes.example.com",
    (host) => {
      const m = build(svc("shop", "x", OLD, { [HOST]: host }), { ownHosts: "lb.example.com,*.nodes.example.com" });
      expect(m.warnings).toEqual([]);
      expect(routes(m)[0]).toMatch(/^host:/);
    },
  );

  it("gives an IPv4 address to a namespace only when --host-claims lists that exact address for it", () => {
    const hostClaims = { ops: ["10.0.0.5", "*.example.com"], shop: ["*.0.5"] };
    const m = build(
      [
        ...svc("ops", "edge", OLD, { [HOST]: "10.0.0.5" }),
        ...svc("ops", "other", OLD, { [HOST]: "10.0.0.6" }),
        ...svc("shop", "x", OLD, { [HOST]: "1.0.0.5" }),
      ],
      { hostClaims },
    );
    expect(routes(m).filter((r) => r.startsWith("host:"))).toEqual(["host:10.0.0.5 -> ops_edge_80"]);
    expect(claims(m)).toEqual([
      { service: "ops/other", annotation: HOST, owner: "--own-hosts" },
      { service: "shop/x", annotation: HOST, owner: "--own-hosts" },
    ]);
  });

  it("--own-hosts wins over --host-claims: an operator who names the load balancer's host keeps it for paths", () => {
    const m = build(svc("ops", "edge", OLD, { [HOST]: "lb.example.com" }), {
      ownHosts: "lb.example.com",
      hostClaims: { ops: ["lb.example.com"] },
    });
    expect(routes(m)).toEqual(["path:/ops/edge -> ops_edge_80"]);
    expect(claims(m)).toEqual([{ service: "ops/edge", annotation: HOST, owner: "--own-hosts" }]);
  });
});

describe("lb.host: no wildcard at or above a public suffix", () => {
  it.each(["*.com", "*.uk", "*.test", "*.co.uk", "*.CO.UK", "*.com.au", "*.co.jp", "*.github.io", "*.herokuapp.com"])(
    "refuses %s with a warning",
    (host) => {
      const m = build(svc("evil", "x", OLD, { [HOST]: host }));
      expect(routes(m)).toEqual(["path:/evil/x -> evil_x_80"]);
      expect(m.warnings).toEqual([
        { service: "evil/x", annotation: HOST, message: expect.stringContaining("public suffix") },
      ]);
    },
  );

  it.each(["*.shop.co.uk", "*.apps.test", "*.example.com", "shop.co.uk", "co.uk", "*.me.github.io"])(
    "accepts %s, a registrable domain or below",
    (host) => {
      const m = build(svc("shop", "x", OLD, { [HOST]: host }));
      expect(m.warnings).toEqual([]);
      expect(routes(m)[0]).toMatch(/^host:/);
    },
  );
});

describe("a namespace's path space and a default Service of the same name: the older holds /<name>/", () => {
  it("the older default/web keeps /web/admin/x from Service admin of the newer namespace web, which is warned and skipped", () => {
    const m = build([...svc("default", "web", OLD), ...svc("web", "admin", NEW)]);
    expect(routes(m)).toEqual(["path:/web -> default_web_80"]);
    expect(pathsMap(m)).toEqual(["/web/ default_web_80"]);
    expect(m.warnings).toEqual([
      {
        service: "web/admin",
        port: 80,
        owner: "default/web",
        message: expect.stringContaining("own path /web/admin lies in default/web's own path /web"),
      },
    ]);
    expect(m.skipped).toEqual([{ service: "web/admin", port: 80, reason: expect.stringContaining("default/web") }]);
    expect(m.backends.map((b) => b.name)).toEqual(["default_web_80"]);
  });

  it("the older namespace shop keeps /shop/other from the newer default/shop, whose other ports stay", () => {
    const m = build([...svc("shop", "api", OLD), ...svc("default", "shop", NEW, {}, [80, 8080])]);
    expect(routes(m)).toEqual(["path:/shop:8080 -> default_shop_8080", "path:/shop/api -> shop_api_80"]);
    expect(claims(m)).toEqual([{ service: "default/shop", annotation: undefined, owner: "shop/*" }]);
    expect(m.warnings[0]!.message).toContain("own path /shop lies in namespace shop's path space /shop/");
    expect(m.skipped).toEqual([{ service: "default/shop", port: 80, reason: expect.stringContaining("shop/*") }]);
  });

  it("the age of a namespace is its oldest Service's", () => {
    const m = build([...svc("default", "shop", MID), ...svc("shop", "api", NEW), ...svc("shop", "zz-old", OLD)]);
    expect(routes(m)).toEqual(["path:/shop/zz-old -> shop_zz-old_80", "path:/shop/api -> shop_api_80"]);
    expect(claims(m)).toEqual([{ service: "default/shop", annotation: undefined, owner: "shop/*" }]);
  });

  it("a loser with a host claim keeps its host route", () => {
    const m = build([...svc("default", "web", OLD), ...svc("web", "admin", NEW, { [HOST]: "admin.example.com" })]);
    expect(routes(m)).toEqual(["host:admin.example.com -> web_admin_80", "path:/web -> default_web_80"]);
    expect(m.skipped).toEqual([]);
    expect(m.warnings[0]!.message).toContain("the Service keeps host admin.example.com");
    expect(m.backends.find((b) => b.name === "web_admin_80")!.strip).toBeNull();
  });

  it("equal ages go to the first by namespace/name", () => {
    const m = build([...svc("default", "web", OLD), ...svc("web", "admin", OLD)]);
    expect(routes(m)).toEqual(["path:/web -> default_web_80"]);
    const n = build([...svc("default", "web", OLD), ...svc("aaa", "x", OLD), ...svc("web", "admin", OLD)]);
    expect(routes(n)).toEqual(["path:/aaa/x -> aaa_x_80", "path:/web -> default_web_80"]);
  });

  it("a default Service without port 80 does not collide: /web:8080 is not in /web/", () => {
    const m = build([...svc("default", "web", OLD, {}, [8080]), ...svc("web", "admin", NEW)]);
    expect(routes(m)).toEqual(["path:/web/admin -> web_admin_80", "path:/web:8080 -> default_web_8080"]);
    expect(m.warnings).toEqual([]);
  });
});

describe("lb.aclMatch: no catch-all over other tenants", () => {
  it.each([
    ["aaa", "shop/*", "path / covers namespace shop's path space /shop/"],
    ["default", "shop/*", "path / covers namespace shop's path space /shop/"],
  ])("refuses / from namespace %s while another namespace has a space", (ns, owner, reason) => {
    const m = build([
      ...svc(ns, "all", OLD, { [ACL]: "/" }),
      ...svc("shop", "api", NEW),
      ...svc("default", "web", NEW),
    ]);
    expect(routes(m).filter((r) => r.includes("_all_"))).toEqual([
      `path:${ns === "default" ? "" : `/${ns}`}/all -> ${ns}_all_80`,
    ]);
    expect(claims(m)).toEqual([{ service: `${ns}/all`, annotation: ACL, owner }]);
    expect(m.warnings[0]!.message).toContain(reason);
  });

  it("refuses / while a Service of another tenant has its own path in the shared space", () => {
    const m = build([...svc("aaa", "all", OLD, { [ACL]: "/" }), ...svc("default", "web", NEW, {}, [8080])]);
    expect(claims(m)).toEqual([{ service: "aaa/all", annotation: ACL, owner: "default/web" }]);
    expect(m.warnings[0]!.message).toContain("path / covers default/web's own path /web:8080");
  });

  it("refuses / from default while another default Service exists: default is the shared space, not a tenant's", () => {
    const m = build([...svc("default", "all", OLD, { [ACL]: "/" }), ...svc("default", "web", NEW)]);
    expect(claims(m)).toEqual([{ service: "default/all", annotation: ACL, owner: "default/web" }]);
  });

  it("allows / when it covers only the claimant's own namespace and the shared space", () => {
    const m = build([...svc("shop", "all", NEW, { [ACL]: "/" }), ...svc("shop", "api", OLD)]);
    expect(m.warnings).toEqual([]);
    expect(routes(m)).toEqual(["path:/shop/api -> shop_api_80", "path:/ -> shop_all_80"]);
  });
});

describe("lb.aclMatch: one entry per key", () => {
  it("a Service of the newer namespace web cannot claim /web, the older default/web's own path", () => {
    const m = build([...svc("default", "web", OLD), ...svc("web", "x", NEW, { [ACL]: "/web" })]);
    expect(pathsMap(m)).toEqual(["/web/ default_web_80"]);
    expect(claims(m)).toEqual([
      { service: "web/x", annotation: undefined, owner: "default/web" },
      { service: "web/x", annotation: ACL, owner: "default/web" },
    ]);
    expect(m.skipped).toEqual([{ service: "web/x", port: 80, reason: expect.any(String) }]);
  });

  it("a Service of the older namespace web claims /web once; default/web is warned", () => {
    const m = build([...svc("default", "web", NEW), ...svc("web", "x", OLD, { [ACL]: "/web" })]);
    expect(pathsMap(m)).toEqual(["/web/ web_x_80"]);
    expect(claims(m)).toEqual([{ service: "default/web", annotation: undefined, owner: "web/*" }]);
  });

  it("a port's custom path never doubles another port's own path", () => {
    const m = build(svc("default", "web", OLD, { [ACL]: "/web:8080" }, [80, 8080]));
    expect(pathsMap(m)).toEqual(["/web/ default_web_80", "/web:8080/ default_web_8080"]);
    expect(claims(m)).toEqual([{ service: "default/web", annotation: ACL, owner: "default/web" }]);
  });
});

describe("properties over small clusters of colliding names", () => {
  const NAMESPACES = ["default", "web", "shop", "aaa"] as const;
  const NAMES = ["web", "shop", "admin", "api", "aaa"] as const;
  const AGES = [OLD, MID, NEW, undefined] as const;
  const ACLS = ["/", "/web", "/web/admin", "/shop", "/shop/other", "/aaa", "/aaa/web", "/docs", "/web:8080"];
  const HOSTS = ["127.0.0.1", "localhost", "a.example.com", "*.example.com", "*.com", "*.co.uk", "lb.example.com"];
  const REQUESTS = [
    "/",
    "/web",
    "/web/admin/x",
    "/web/x",
    "/web:8080/x",
    "/shop",
    "/shop/other",
    "/shop/api/x",
    "/shop:8080/x",
    "/aaa/web/x",
    "/aaa/x",
    "/admin/x",
    "/api:8080",
    "/docs/x",
    "/x",
  ];

  interface Gen {
    ns: (typeof NAMESPACES)[number];
    name: (typeof NAMES)[number];
    age: (typeof AGES)[number];
    ports: number[];
    acl: string | null;
    host: string | null;
  }

  const cluster = fc.uniqueArray(
    fc.record({
      ns: fc.constantFrom(...NAMESPACES),
      name: fc.constantFrom(...NAMES),
      age: fc.constantFrom(...AGES),
      ports: fc.subarray([80, 8080], { minLength: 1 }),
      acl: fc.option(fc.constantFrom(...ACLS)),
      host: fc.option(fc.constantFrom(...HOSTS)),
    }),
    { selector: (s) => `${s.ns}/${s.name}`, maxLength: 8 },
  );

  function model(gens: Gen[]): Model {
    return build(
      gens.flatMap((g) =>
        svc(
          g.ns,
          g.name,
          g.age,
          { ...(g.acl ? { [ACL]: g.acl } : {}), ...(g.host ? { [HOST]: g.host } : {}) },
          g.ports,
        ),
      ),
      { ownHosts: "lb.example.com" },
    );
  }

  /** The claim order: creationTimestamp (none: newest), then namespace/name. */
  function older(a: Gen, b: Gen): boolean {
    const t = (g: Gen) => (g.age === undefined ? Infinity : Date.parse(g.age));
    if (t(a) !== t(b)) return t(a) < t(b);
    return `${a.ns}/` < `${b.ns}/` || (a.ns === b.ns && a.name < b.name);
  }

  /** The route HAProxy picks for a path: the longest prefix on a segment boundary. */
  function routed(m: Model, path: string): string | undefined {
    let best: { prefix: string; backend: string } | undefined;
    for (const r of m.httpRoutes) {
      if (r.match.kind !== "path") continue;
      const p = r.match.prefix;
      const hit = p === "/" || path === p || path.startsWith(`${p}/`);
      if (hit && (!best || p.length > best.prefix.length)) best = { prefix: p, backend: r.backend };
    }
    return best && `${m.backends.find((b) => b.name === best.backend)!.namespace}/${best.backend}`;
  }

  /** Who a request path belongs to, by the rules of docs/annotations.md: `<ns>/*`, `default/<name>`, or null (shared). */
  function owner(gens: Gen[], path: string): string | null {
    const first = path.split("/")[1]!;
    const [name, port] = first.split(":");
    const def = gens.find((g) => g.ns === "default" && g.name === name);
    if (port !== undefined) return def?.ports.includes(Number(port)) ? `default/${name}` : null;
    const members = gens.filter((g) => g.ns === name && name !== "default");
    const oldest = members.reduce<Gen | undefined>((o, g) => (!o || older(g, o) ? g : o), undefined);
    const defHolds = def?.ports.includes(80) === true;
    if (oldest && (!defHolds || older(oldest, def!))) return `${name}/*`;
    return defHolds ? `default/${name}` : null;
  }

  it("no map has a key twice", () => {
    fc.assert(
      fc.property(cluster, (gens) => {
        const maps = routeMapLines(model(gens).httpRoutes, () => "redirect");
        for (const path of ROUTE_MAPS) {
          const keys = maps.get(path)!.map((l) => l.split(" ")[0]);
          expect(new Set(keys).size, path).toBe(keys.length);
        }
      }),
    );
  });

  it("no claim routes a path in another tenant's space: a namespace's space, or a default Service's own path", () => {
    fc.assert(
      fc.property(cluster, (gens) => {
        const m = model(gens);
        for (const path of REQUESTS) {
          const who = owner(gens, path);
          const got = routed(m, path);
          if (who === null || got === undefined) continue;
          // `got` is "<namespace>/<backend>": the backend is <namespace>_<name>_<port>.
          const [ns, backend] = got.split("/") as [string, string];
          if (who.endsWith("/*")) expect(ns, `${path} -> ${backend}`).toBe(who.slice(0, -2));
          else expect(`${ns}/${backend.slice(ns.length + 1, backend.lastIndexOf("_"))}`, path).toBe(who);
        }
      }),
    );
  });

  it("no host route names the load balancer's own address or name, or a public suffix", () => {
    fc.assert(
      fc.property(cluster, (gens) => {
        const hosts = routes(model(gens)).filter((r) => r.startsWith("host:"));
        // *.example.com covers lb.example.com, the load balancer's own name (--own-hosts).
        for (const h of hosts) expect(h).toMatch(/^host:a\.example\.com /);
      }),
    );
  });

  it("every HTTP port is routed somewhere, or skipped with a reason", () => {
    fc.assert(
      fc.property(cluster, (gens) => {
        const m = model(gens);
        for (const g of gens)
          for (const port of g.ports) {
            const backend = `${g.ns}_${g.name}_${port}`;
            const skipped = m.skipped.some((s) => s.service === `${g.ns}/${g.name}` && s.port === port);
            expect(m.httpRoutes.some((r) => r.backend === backend) || skipped, backend).toBe(true);
          }
      }),
    );
  });
});
