/*
 * Gateway API routes through a real HAProxy: the behaviours of the conformance suite's HTTPRoute
 * tests (kubernetes-sigs/gateway-api conformance/tests/httproute-*.go) on our own objects, on a
 * Gateway port of its own and on --http-port beside annotated Services.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import { parseSnapshot, snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { list, service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../support/gateway-fixtures.js";
import {
  haproxyCheck,
  loopbackOptions,
  requireHaproxy,
  runHaproxy,
  writePatternFiles,
  type LoopbackSetup,
  type RunningHaproxy,
} from "../support/haproxy.js";
import { echoBackend, freePort, type EchoBackend, httpRequest } from "../support/net.js";

const renderer = new Renderer(loadTemplates());

function exposed(name: string, backend: EchoBackend, annotations?: Record<string, string>) {
  return [
    service(name, [{ port: 8080, name: "http" }], { annotations }),
    slice(name, [{ name: "http", port: backend.port }], ["127.0.0.1"], { name: `${name}-a` }),
  ];
}

const to = (name: string, weight?: number) => ({ name, port: 8080, ...(weight === undefined ? {} : { weight }) });
const route = (name: string, spec: Record<string, unknown>, sectionName = "own") =>
  httpRoute(name, { parentRefs: [{ name: "gw", sectionName }], ...spec });

describe("Gateway API routes through a real HAProxy", () => {
  const names = ["v1", "v2", "v3", "legacy"] as const;
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let rendered = "";
  let own: number;
  let shared: number;

  beforeAll(async () => {
    requireHaproxy();
    for (const n of names) be[n] = await echoBackend(n);
    setup = await loopbackOptions();
    shared = setup.options.httpPort;
    do own = await freePort();
    while (own === shared || own === setup.options.statsPort);
    const items = [
      gatewayClass(),
      gateway("gw", [
        { name: "own", port: own },
        { name: "shared", port: shared, hostname: "gw.example.com" },
        // httproute-listener-hostname-matching.yaml, on the same port
        { name: "listener-1", port: own, hostname: "bar.com" },
        { name: "listener-2", port: own, hostname: "foo.bar.com" },
        { name: "listener-3", port: own, hostname: "*.bar.com" },
        { name: "listener-4", port: own, hostname: "*.foo.com" },
      ]),
      route("backend-v1", { rules: [{ backendRefs: [to("v1")] }] }, "listener-1"),
      route("backend-v2", { rules: [{ backendRefs: [to("v2")] }] }, "listener-2"),
      httpRoute("backend-v3", {
        parentRefs: [
          { name: "gw", sectionName: "listener-3" },
          { name: "gw", sectionName: "listener-4" },
        ],
        rules: [{ backendRefs: [to("v3")] }],
      }),
      route("weights", {
        hostnames: ["weights.example"],
        rules: [{ backendRefs: [to("v1", 70), to("v2", 30), to("v3", 0)] }],
      }),
      // httproute-matching-across-routes.yaml
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
      route("extended", {
        hostnames: ["ext.example"],
        rules: [
          { matches: [{ method: "POST" }], backendRefs: [to("v2")] },
          { matches: [{ queryParams: [{ name: "animal", value: "whale" }] }], backendRefs: [to("v3")] },
          { matches: [{ path: { type: "Exact", value: "/exact" } }], backendRefs: [to("v1")] },
          {
            matches: [{ path: { type: "PathPrefix", value: "/headers" } }],
            filters: [
              {
                type: "RequestHeaderModifier",
                requestHeaderModifier: {
                  set: [{ name: "X-Set", value: "set %value" }],
                  add: [{ name: "X-Add", value: "added" }],
                  remove: ["X-Remove"],
                },
              },
              { type: "ResponseHeaderModifier", responseHeaderModifier: { set: [{ name: "X-Answer", value: "yes" }] } },
            ],
            backendRefs: [to("v1")],
          },
          {
            matches: [{ path: { type: "PathPrefix", value: "/hostname-redirect" } }],
            filters: [{ type: "RequestRedirect", requestRedirect: { hostname: "example.org", statusCode: 301 } }],
          },
          {
            matches: [{ path: { type: "PathPrefix", value: "/to-https-port" } }],
            filters: [{ type: "RequestRedirect", requestRedirect: { scheme: "https", port: 8443, statusCode: 308 } }],
          },
          {
            matches: [{ path: { type: "PathPrefix", value: "/to-https" } }],
            filters: [{ type: "RequestRedirect", requestRedirect: { scheme: "https", statusCode: 307 } }],
          },
          {
            matches: [{ path: { type: "PathPrefix", value: "/prefix/one" } }],
            filters: [
              { type: "URLRewrite", urlRewrite: { path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/one" } } },
            ],
            backendRefs: [to("v1")],
          },
          {
            matches: [{ path: { type: "PathPrefix", value: "/full" } }],
            filters: [
              {
                type: "URLRewrite",
                urlRewrite: {
                  hostname: "rewritten.example",
                  path: { type: "ReplaceFullPath", replaceFullPath: "/replaced" },
                },
              },
            ],
            backendRefs: [to("v1")],
          },
          { matches: [{ path: { type: "PathPrefix", value: "/invalid" } }], backendRefs: [to("missing")] },
          { matches: [{ path: { type: "PathPrefix", value: "/empty" } }], backendRefs: [to("empty")] },
        ],
      }),
      route("on-http-port", { rules: [{ backendRefs: [to("v2")] }] }, "shared"),
      // Simple matches, which live in the port's match maps.
      route("edge", {
        hostnames: ["edge.example"],
        rules: [
          { matches: [{ path: { type: "Exact", value: "/x" } }], backendRefs: [to("v2")] },
          { matches: [{ path: { type: "PathPrefix", value: "/" } }], backendRefs: [to("v1")] },
        ],
      }),
      ...exposed("v1", be.v1!),
      ...exposed("v2", be.v2!),
      ...exposed("v3", be.v3!),
      ...exposed("legacy", be.legacy!),
      service("empty", [{ port: 8080, name: "http" }]),
    ];
    const { config, warnings } = renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer);
    rendered = config;
    expect(warnings.map((w) => w.message)).toEqual([
      "HTTPRoute default/extended on Gateway default/gw: BackendNotFound: backendRef missing: Service default/missing not found (their share of the traffic is answered 500)",
    ]);
    expect(haproxyCheck(config, setup.dir)).toMatchObject({ ok: true });
    // No warning either (but the missing state file of a first start): every http-request line
    // comes before the first use_backend.
    writePatternFiles(config, setup.dir);
    writeFileSync(join(setup.dir, "warn.cfg"), config);
    const check = spawnSync("haproxy", ["-c", "-f", join(setup.dir, "warn.cfg")], { encoding: "utf8" });
    const warned = `${check.stdout}${check.stderr}`
      .split("\n")
      .filter((line) => line.includes("[WARNING]") && !line.includes("server state file"));
    expect(warned).toEqual([]);
    hx = await runHaproxy(config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all(Object.values(be).map((b) => b.close()));
    setup?.cleanup();
  });

  const get = (path: string, headers: Record<string, string> = {}) => httpRequest(own, "GET", path, headers);

  it.each([
    ["example.com", "/", {}, "v1"],
    ["example.com", "/example", {}, "v1"],
    ["example.net", "/example", {}, "v1"],
    ["example.com", "/example", { version: "one" }, "v1"],
    ["example.com", "/v2", {}, "v2"],
    ["example.net", "/v2", {}, "v1"],
    ["example.com", "/v2/example", {}, "v2"],
    ["example.com", "/", { version: "two" }, "v2"],
    ["EXAMPLE.com:1234", "/v2", {}, "v2"],
  ])("Host %s %s %j goes to %s (MatchingAcrossRoutes)", async (host, path, headers, backend) => {
    const r = await get(path, { host, ...headers });
    expect(r.status).toBe(200);
    expect(r.body.split(" ")[0]).toBe(backend);
  });

  it.each([
    ["bar.com", "v1"],
    ["foo.bar.com", "v2"],
    ["baz.bar.com", "v3"],
    ["multiple.prefixes.bar.com", "v3"],
    ["multiple.prefixes.foo.com", "v3"],
  ])("Host %s goes to %s by its listener's hostname (ListenerHostnameMatching)", async (host, backend) => {
    expect((await get("/", { host })).body).toBe(`${backend} /`);
  });

  it.each(["foo.com", "no.matching.host"])("Host %s matches no listener: 404", async (host) => {
    expect((await get("/", { host })).status).toBe(404);
  });

  it("answers 404 when nothing matches on a Gateway's own port", async () => {
    expect((await get("/", { host: "unknown.example" })).status).toBe(404);
    expect((await get("/v2x", { host: "example.org" })).status).toBe(404);
  });

  it("looks matches up in the port's maps as their lines would match them: a host with a path in it matches no host", async () => {
    expect(rendered).toMatch(/^#> maps\/gw\.\d+\.exact\.map\n#\| edge\.example\/x \d+$/m);
    expect((await get("/x", { host: "edge.example" })).body).toBe("v2 /x");
    expect((await get("/x/y", { host: "edge.example" })).body).toBe("v1 /x/y");
    // `OPTIONS *` has no path: the host's prefix / matches it, as its line would.
    expect((await httpRequest(own, "OPTIONS", "*", { host: "edge.example" })).body.split(" ")[0]).toBe("v1");
    // The host and the path join into one key: a Host header holding a `/` must not reach edge.example's keys.
    const odd = await get("/", { host: "edge.example/x" });
    expect(odd.status).toBe(404);
  });

  it("splits by weight: 70/30/0 within ±5 % over 500 requests (Weight)", async () => {
    const sample = async () => {
      const counts: Record<string, number> = { v1: 0, v2: 0, v3: 0 };
      for (let i = 0; i < 50; i++) {
        const answers = await Promise.all(Array.from({ length: 10 }, () => get("/", { host: "weights.example" })));
        for (const a of answers) counts[a.body.split(" ")[0]!]! += 1;
      }
      return counts;
    };
    // The conformance suite's own check (conformance/utils/weight): |share - weight| ≤ 0.05. One
    // sample fails it about 1.6 % of the time by chance alone (2.4 standard deviations at 70 %
    // of 500), so a second sample is taken before calling the split wrong.
    const within = (c: Record<string, number>) =>
      Math.abs(c.v1! / 500 - 0.7) <= 0.05 && Math.abs(c.v2! / 500 - 0.3) <= 0.05 && c.v3 === 0;
    let counts = await sample();
    if (!within(counts)) counts = await sample();
    expect(counts.v3).toBe(0);
    expect(counts.v1! + counts.v2!).toBe(500);
    expect(Math.abs(counts.v1! / 500 - 0.7)).toBeLessThanOrEqual(0.05);
  });

  it("matches the method and query parameters (extended)", async () => {
    expect((await httpRequest(own, "POST", "/x", { host: "ext.example" })).body).toBe("v2 /x");
    expect((await get("/q?animal=whale", { host: "ext.example" })).body).toBe("v3 /q?animal=whale");
    expect((await get("/q?animal=dolphin", { host: "ext.example" })).status).toBe(404);
  });

  it("matches an Exact path only exactly (ExactPathMatching)", async () => {
    expect((await get("/exact", { host: "ext.example" })).body).toBe("v1 /exact");
    expect((await get("/exact/", { host: "ext.example" })).status).toBe(404);
  });

  it("sets, adds and removes request headers, and sets response headers (RequestHeaderModifier, ResponseHeaderModifier)", async () => {
    const r = await get("/headers", { host: "ext.example", "X-Set": "old", "X-Add": "first", "X-Remove": "gone" });
    expect(r.status).toBe(200);
    expect(r.headers["x-answer"]).toBe("yes");
    const seen = be.v1!.seen.at(-1)!.headers;
    expect(seen["x-set"]).toBe("set %value");
    expect(seen["x-add"]).toBe("first, added");
    expect(seen["x-remove"]).toBeUndefined();
  });

  it("redirects with the hostname and status asked, to the listener's port (RedirectHostAndStatus)", async () => {
    const r = await get("/hostname-redirect?x=1", { host: "ext.example" });
    expect(r.status).toBe(301);
    expect(r.headers.location).toBe(`http://example.org:${own}/hostname-redirect?x=1`);
  });

  it("redirects to another scheme and port, with 307 and 308 (RedirectPortAndScheme, 307Redirect, 308Redirect)", async () => {
    const withPort = await get("/to-https-port/a?x=1", { host: "Ext.Example:1234" });
    expect(withPort.status).toBe(308);
    expect(withPort.headers.location).toBe("https://Ext.Example:8443/to-https-port/a?x=1");
    const scheme = await get("/to-https", { host: "ext.example" });
    expect(scheme.status).toBe(307);
    expect(scheme.headers.location).toBe("https://ext.example/to-https");
  });

  it.each([
    ["/prefix/one", "/one"],
    ["/prefix/one/two", "/one/two"],
    ["/prefix/one/two?q=1", "/one/two?q=1"],
  ])("rewrites the matched prefix: %s reaches the pod as %s (RewritePath)", async (path, seen) => {
    expect((await get(path, { host: "ext.example" })).body).toBe(`v1 ${seen}`);
  });

  it("rewrites the whole path and the host (RewriteHost)", async () => {
    expect((await get("/full/x?q=1", { host: "ext.example" })).body).toBe("v1 /replaced?q=1");
    expect(be.v1!.seen.at(-1)!.headers.host).toBe("rewritten.example");
  });

  it("answers 500 for an unresolved backendRef and 503 for a Service without ready endpoints", async () => {
    expect((await get("/invalid", { host: "ext.example" })).status).toBe(500);
    expect((await get("/empty", { host: "ext.example" })).status).toBe(503);
  });

  it("on --http-port, serves the Gateway's routes first and the Services' own paths beside them", async () => {
    expect((await httpRequest(shared, "GET", "/anything", { host: "gw.example.com" })).body).toBe("v2 /anything");
    // A Service's own path is /<name>:<port> for a port other than 80 (docs/annotations.md).
    expect((await httpRequest(shared, "GET", "/legacy:8080/x", { host: "other.example" })).body).toBe("legacy /x");
    expect((await httpRequest(shared, "GET", "/legacy:8080/x", { host: "gw.example.com" })).body).toBe(
      "v2 /legacy:8080/x",
    );
  });
});

describe("examples/gateway.yaml", () => {
  it("renders, without warnings, a config HAProxy accepts", async () => {
    requireHaproxy();
    const setup = await loopbackOptions();
    try {
      const snap = parseSnapshot(readFileSync("examples/gateway.yaml", "utf8"));
      const { config, warnings } = renderSnapshot(snap, setup.options, renderer);
      expect(snap.problems).toEqual([]);
      expect(warnings).toEqual([]);
      expect(config).toContain("frontend gw:8081 ");
      expect(haproxyCheck(config, setup.dir)).toMatchObject({ ok: true });
    } finally {
      setup.cleanup();
    }
  });
});

describe("tenants on --http-port through a real HAProxy: a Gateway open to every namespace", () => {
  const OPEN = { namespaces: { from: "All" } };
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let http: number;

  const tenant = (name: string, namespace: string, created: string, annotations?: Record<string, string>) => [
    service(name, [{ port: 80, name: "http" }], { namespace, created, annotations }),
    slice(name, [{ name: "http", port: be[name]!.port }], ["127.0.0.1"], { name: `${name}-a`, namespace }),
  ];
  const routeIn = (name: string, namespace: string, created: string, spec: Record<string, unknown>) =>
    httpRoute(name, { parentRefs: [{ name: "gw", namespace: "infra" }], ...spec }, { namespace, created });
  const toEvil = { backendRefs: [{ name: "evil", port: 80 }] };

  beforeAll(async () => {
    requireHaproxy();
    for (const n of ["shop", "evil", "late", "gwteam"]) be[n] = await echoBackend(n);
    setup = await loopbackOptions();
    http = setup.options.httpPort;
    const items = [
      gatewayClass(),
      gateway("gw", [{ name: "http", port: http, allowedRoutes: OPEN }], { namespace: "infra" }),
      ...tenant("shop", "shop", "2024-01-01T00:00:00Z", { "serviceloadbalancer/lb.host": "shop.example.com" }),
      ...tenant("evil", "evil", "2025-01-01T00:00:00Z"),
      ...tenant("gwteam", "gwteam", "2024-01-01T00:00:00Z"),
      ...tenant("late", "late", "2025-06-01T00:00:00Z", { "serviceloadbalancer/lb.host": "team.example.com" }),
      routeIn("by-host", "evil", "2025-01-01T00:00:00Z", { hostnames: ["shop.example.com"], rules: [toEvil] }),
      routeIn("by-path", "evil", "2025-01-01T00:00:00Z", {
        rules: [{ matches: [{ path: { type: "PathPrefix", value: "/shop" } }], ...toEvil }],
      }),
      routeIn("own-name", "evil", "2025-01-01T00:00:00Z", { hostnames: ["localhost"], rules: [toEvil] }),
      routeIn("first", "gwteam", "2024-01-01T00:00:00Z", {
        hostnames: ["team.example.com"],
        rules: [{ backendRefs: [{ name: "gwteam", port: 80 }] }],
      }),
    ];
    const { config, warnings } = renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer);
    expect(warnings.map((w) => `${w.service}: ${w.message.split(":")[0]}`).sort()).toEqual([
      "gateway: HTTPRoute evil/by-host on Gateway infra/gw",
      "gateway: HTTPRoute evil/by-path on Gateway infra/gw",
      "gateway: HTTPRoute evil/own-name on Gateway infra/gw",
      "late/late: host team.example.com is served on --http-port by HTTPRoute gwteam/first, which is older; not routed there",
    ]);
    hx = await runHaproxy(config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all(Object.values(be).map((b) => b.close()));
    setup?.cleanup();
  });

  const who = async (host: string, path: string) => (await httpRequest(http, "GET", path, { host })).body.split(" ")[0];

  it("a route of another namespace does not take a host an older Service claims", async () => {
    expect(await who("shop.example.com", "/")).toBe("shop");
    expect(await who("shop.example.com", "/anything")).toBe("shop");
  });

  it("a route that names no host does not take another namespace's paths on the load balancer's own names", async () => {
    expect(await who("localhost", "/shop/shop/x")).toBe("shop");
    expect(await who("127.0.0.1", "/shop/shop/x")).toBe("shop");
  });

  it("an older route keeps its host from a newer Service's lb.host, which keeps its own path", async () => {
    expect(await who("team.example.com", "/")).toBe("gwteam");
    expect(await who("localhost", "/late/late/x")).toBe("late");
  });
});
