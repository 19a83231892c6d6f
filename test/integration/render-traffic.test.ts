import { connect } from "node:net";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRenderOptions } from "../../shared/core/settings/options.js";
import { splitConfig } from "../../shared/core/haproxy-config/pattern-files.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import { PATHS_MAP } from "../../shared/core/haproxy-config/route-maps.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { list, service, slice } from "../support/fixtures.js";
import {
  haproxyCheck,
  loopbackOptions,
  requireHaproxy,
  runHaproxy,
  type LoopbackSetup,
  type RunningHaproxy,
} from "../support/haproxy.js";
import { echoBackend, freePort, httpGet, tcpGreeter, type EchoBackend } from "../support/net.js";

const renderer = new Renderer(loadTemplates());

/** One Service whose single endpoint is a loopback echo backend. */
function exposed(
  name: string,
  backend: EchoBackend,
  opts: { ns?: string; port?: number; annotations?: Record<string, string>; created?: string } = {},
) {
  const port = opts.port ?? 80;
  return [
    service(name, [{ port, name: "web" }], {
      namespace: opts.ns,
      annotations: opts.annotations,
      created: opts.created,
    }),
    slice(name, [{ name: "web", port: backend.port }], ["127.0.0.1"], { namespace: opts.ns, name: `${name}-${port}` }),
  ];
}

describe("routing through a real HAProxy", () => {
  const names = ["foo", "foobar", "svc80", "svc8080", "api", "host", "wild"] as const;
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let tcpPort: number;
  let greeter: { port: number; close(): Promise<void> };
  let port: number;

  beforeAll(async () => {
    requireHaproxy();
    for (const n of names) be[n] = await echoBackend(n);
    greeter = await tcpGreeter("mysql");
    tcpPort = await freePort();
    setup = await loopbackOptions({ tcpServices: `db:${tcpPort}` });
    port = setup.options.httpPort;
    const items = [
      ...exposed("foo", be.foo!),
      ...exposed("foobar", be.foobar!),
      service("svc", [
        { port: 80, name: "a" },
        { port: 8080, name: "b" },
      ]),
      slice("svc", [{ name: "a", port: be.svc80!.port }], ["127.0.0.1"], { name: "svc-a" }),
      slice("svc", [{ name: "b", port: be.svc8080!.port }], ["127.0.0.1"], { name: "svc-b" }),
      ...exposed("api", be.api!, { ns: "shop" }),
      ...exposed("host", be.host!, { annotations: { "serviceloadbalancer/lb.host": "Web.Example.com" } }),
      ...exposed("wild", be.wild!, { annotations: { "serviceloadbalancer/lb.host": "*.apps.test" } }),
      service("db", [{ port: tcpPort, name: "sql" }]),
      slice("db", [{ name: "sql", port: greeter.port }], ["127.0.0.1"]),
    ];
    const { config, warnings } = renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer);
    expect(warnings).toEqual([]);
    expect(haproxyCheck(config, setup.dir)).toMatchObject({ ok: true });
    hx = await runHaproxy(config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all([...Object.values(be).map((b) => b.close()), greeter?.close()]);
    setup?.cleanup();
  });

  it.each([
    ["/foo", "foo /"],
    ["/foo/", "foo /"],
    ["/foo/a/b?q=1", "foo /a/b?q=1"],
    ["/foobar/x", "foobar /x"],
    ["/svc/z", "svc80 /z"],
    ["/svc:8080/z", "svc8080 /z"],
    ["/shop/api/v1", "api /v1"],
  ])("GET %s is answered by %j with the prefix stripped", async (path, expected) => {
    const r = await httpGet(port, path);
    expect(r.status).toBe(200);
    expect(r.body).toBe(expected);
  });

  it("tells the pod which prefix was stripped", async () => {
    await httpGet(port, "/shop/api/x");
    expect(be.api!.seen.at(-1)!.headers["x-forwarded-prefix"]).toBe("/shop/api");
  });

  it.each(["/foox", "/fo", "/svc:80", "/shop", "/", "/api/v1"])(
    "GET %s matches nothing and gets the default page",
    async (path) => {
      const r = await httpGet(port, path);
      expect(r.status).toBe(404);
      expect(r.body).toContain("No service matches this request");
    },
  );

  it.each([
    ["web.example.com", "/anything", "host /anything"],
    ["WEB.EXAMPLE.COM:8080", "/x", "host /x"],
    ["web.example.com", "/foo/bar", "host /foo/bar"],
    ["a.apps.test", "/y", "wild /y"],
    ["deep.a.apps.test", "/", "wild /"],
  ])("Host %s routes %s to the host's Service, path unchanged, ahead of path rules", async (host, path, expected) => {
    const r = await httpGet(port, path, { host });
    expect(r.body).toBe(expected);
  });

  it("does not route the bare wildcard domain", async () => {
    expect((await httpGet(port, "/", { host: "apps.test" })).status).toBe(404);
  });

  it("a path-routed request to a host-routed Service is still stripped", async () => {
    expect((await httpGet(port, "/host/q", { host: "other.test" })).body).toBe("host /q");
  });

  it("serves a TCP Service on its own frontend", async () => {
    const got = await new Promise<string>((resolve, reject) => {
      const s = connect(tcpPort, "127.0.0.1");
      let data = "";
      s.on("data", (c) => (data += c.toString()));
      s.on("end", () => resolve(data));
      s.on("error", reject);
    });
    expect(got).toBe("mysql\n");
  });
});

describe("one tenant cannot take another's route", () => {
  const OLD = "2024-01-01T00:00:00Z";
  const NEW = "2025-06-01T12:00:00Z";
  const HOST = "serviceloadbalancer/lb.host";
  const ACL = "serviceloadbalancer/lb.aclMatch";
  const names = ["api", "web", "docs", "evil", "wild", "squat", "under", "late"] as const;
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let port: number;
  let warnings: Array<{ service: string; owner?: string }>;

  beforeAll(async () => {
    requireHaproxy();
    for (const n of names) be[n] = await echoBackend(n);
    setup = await loopbackOptions({ tcpServices: "" });
    port = setup.options.httpPort;
    const items = [
      // The owners: older, and in namespaces that sort after the intruders'.
      ...exposed("api", be.api!, { ns: "shop", created: OLD, annotations: { [HOST]: "api.example.com" } }),
      ...exposed("web", be.web!, { created: NEW }),
      ...exposed("docs", be.docs!, { ns: "zzz", created: OLD, annotations: { [ACL]: "/docs" } }),
      // The intruders, all in namespace aaa, which sorts first.
      ...exposed("evil", be.evil!, { ns: "aaa", created: NEW, annotations: { [HOST]: "API.example.com" } }),
      ...exposed("wild", be.wild!, { ns: "aaa", created: OLD, annotations: { [HOST]: "*.example.com" } }),
      ...exposed("squat", be.squat!, { ns: "aaa", created: OLD, annotations: { [ACL]: "/shop/api" } }),
      ...exposed("under", be.under!, { ns: "aaa", created: OLD, annotations: { [ACL]: "/web/admin" } }),
      ...exposed("late", be.late!, { ns: "aaa", created: NEW, annotations: { [ACL]: "/docs" } }),
    ];
    const rendered = renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer);
    warnings = rendered.warnings;
    expect(haproxyCheck(rendered.config, setup.dir)).toMatchObject({ ok: true });
    hx = await runHaproxy(rendered.config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all(Object.values(be).map((b) => b.close()));
    setup?.cleanup();
  });

  it.each([
    ["a newer Service claiming an owned host", "api.example.com", "/x", "api /x"],
    ["a wildcard host over an owned exact host", "api.example.com:8080", "/y", "api /y"],
    ["lb.aclMatch into another namespace's path space", "lb.test", "/shop/api/orders", "api /orders"],
    ["lb.aclMatch below a default Service's own path", "lb.test", "/web/admin/users", "web /admin/users"],
    ["an older claim of the same path by a namespace that sorts first", "lb.test", "/docs/guide", "docs /docs/guide"],
  ])("%s: the owner keeps the traffic", async (_, host, path, expected) => {
    const r = await httpGet(port, path, { host });
    expect(r.status).toBe(200);
    expect(r.body).toBe(expected);
  });

  it.each([
    ["/aaa/evil/a", "evil /a"],
    ["/aaa/squat/a", "squat /a"],
    ["/aaa/under/a", "under /a"],
    ["/aaa/late/a", "late /a"],
  ])("each intruder keeps its own path: GET %s is answered by %j", async (path, expected) => {
    expect((await httpGet(port, path)).body).toBe(expected);
  });

  it("the wildcard still serves the hosts nobody else owns", async () => {
    expect((await httpGet(port, "/z", { host: "other.example.com" })).body).toBe("wild /z");
  });

  it("every refused claim is reported with its owner", () => {
    expect(warnings.map((w) => `${w.service} -> ${w.owner}`).sort()).toEqual([
      "aaa/evil -> shop/api",
      "aaa/late -> zzz/docs",
      "aaa/squat -> shop/*",
      "aaa/under -> default/web",
    ]);
  });
});

describe("no claim takes the load balancer's own address or another tenant's space", () => {
  const OLD = "2024-01-01T00:00:00Z";
  const NEW = "2025-06-01T12:00:00Z";
  const HOST = "serviceloadbalancer/lb.host";
  const ACL = "serviceloadbalancer/lb.aclMatch";
  const names = ["roll", "ip", "local", "node", "wild", "web", "admin", "dup", "api", "shop", "all"] as const;
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let port: number;
  let warnings: Array<{ service: string; owner?: string; annotation?: string }>;
  let pathsMap: readonly string[];

  beforeAll(async () => {
    requireHaproxy();
    for (const n of names) be[n] = await echoBackend(n);
    setup = await loopbackOptions({ tcpServices: "", ownHosts: "node1.test" });
    port = setup.options.httpPort;
    const items = [
      ...exposed("roll", be.roll!, { created: NEW }),
      // Host claims on the load balancer's own names, older than everything else.
      ...exposed("ip", be.ip!, { ns: "evil", created: OLD, annotations: { [HOST]: "127.0.0.1" } }),
      ...exposed("local", be.local!, { ns: "evil", created: OLD, annotations: { [HOST]: "localhost" } }),
      ...exposed("node", be.node!, { ns: "evil", created: OLD, annotations: { [HOST]: "node1.test" } }),
      ...exposed("wild", be.wild!, { ns: "evil", created: OLD, annotations: { [HOST]: "*.co.uk" } }),
      // default/web is older than namespace web; namespace shop is older than default/shop.
      ...exposed("web", be.web!, { created: OLD }),
      ...exposed("admin", be.admin!, { ns: "web", created: NEW }),
      ...exposed("dup", be.dup!, { ns: "web", created: NEW, annotations: { [ACL]: "/web" } }),
      ...exposed("api", be.api!, { ns: "shop", created: OLD }),
      ...exposed("shop", be.shop!, { created: NEW }),
      ...exposed("all", be.all!, { ns: "catch", created: OLD, annotations: { [ACL]: "/" } }),
    ];
    const rendered = renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer);
    warnings = rendered.warnings;
    const split = splitConfig(rendered.config);
    if ("error" in split) throw new Error(split.error);
    pathsMap = split.files.get(PATHS_MAP) ?? [];
    expect(haproxyCheck(rendered.config, setup.dir)).toMatchObject({ ok: true });
    hx = await runHaproxy(rendered.config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all(Object.values(be).map((b) => b.close()));
    setup?.cleanup();
  });

  it.each([
    // No Host given: the client sends the load balancer's address, 127.0.0.1:<port>.
    ["the load balancer's address", undefined, "/roll/x", "roll /x"],
    ["localhost", "localhost", "/roll/x", "roll /x"],
    ["a name in --own-hosts", "node1.test:8080", "/roll/x", "roll /x"],
    ["a name under a public suffix", "shop.co.uk", "/roll/x", "roll /x"],
    ["a path of the older default/web, under namespace web's Service admin", "lb.test", "/web/admin/x", "web /admin/x"],
    ["the older default/web's own path, claimed again from namespace web", "lb.test", "/web", "web /"],
    ["a Service of the older namespace shop", "lb.test", "/shop/api/x", "api /x"],
    ["the catch-all's own path", "lb.test", "/catch/all/x", "all /x"],
  ])("%s: Host %s, GET %s is answered by its owner", async (_, host, path, expected) => {
    const r = await httpGet(port, path, host ? { host } : {});
    expect(r.status).toBe(200);
    expect(r.body).toBe(expected);
  });

  it.each([
    ["namespace shop's space, which the newer default/shop and a catch-all both covered", "/shop/other"],
    ["a port default/web does not have, which only the catch-all covered", "/web:8080/x"],
    ["nothing anyone owns, which only the catch-all covered", "/elsewhere"],
  ])("%s: GET %s matches nothing", async (_, path) => {
    const r = await httpGet(port, path, { host: "lb.test" });
    expect(r.status).toBe(404);
  });

  it("writes each path once", () => {
    const keys = pathsMap.map((l) => l.split(" ")[0]);
    expect(new Set(keys).size).toBe(keys.length);
    expect(pathsMap.filter((l) => l.startsWith("/web/"))).toEqual(["/web/ default_web_80"]);
  });

  it("warns every loser, naming the owner", () => {
    expect(warnings.map((w) => `${w.service} ${w.annotation ?? "own path"} -> ${w.owner ?? "-"}`).sort()).toEqual([
      "catch/all serviceloadbalancer/lb.aclMatch -> evil/*",
      "default/shop own path -> shop/*",
      "evil/ip serviceloadbalancer/lb.host -> --own-hosts",
      "evil/local serviceloadbalancer/lb.host -> --own-hosts",
      "evil/node serviceloadbalancer/lb.host -> --own-hosts",
      "evil/wild serviceloadbalancer/lb.host -> -",
      "web/admin own path -> default/web",
      "web/dup own path -> default/web",
      "web/dup serviceloadbalancer/lb.aclMatch -> default/web",
    ]);
  });
});

describe("default page", () => {
  it("serves --error-page byte for byte with --default-return-code, hostile bytes included", async () => {
    requireHaproxy();
    const setup = await loopbackOptions();
    const page = `<h1>gone</h1> "quoted" 'single' $HOME \${HOME} #not-a-comment \\back\\slash\ttab\r\nñ 日本 \u0001\n`;
    const file = join(setup.dir, "page.html");
    writeFileSync(file, page);
    const options = parseRenderOptions({
      ...setup.options,
      tcpServices: "",
      selector: undefined,
      defaultReturnCode: "503",
      errorPage: file,
    });
    const { config } = renderSnapshot(snapshotFromDocuments([list([])]), options, renderer, { errorPageBody: page });
    const hx = await runHaproxy(config, setup.dir);
    try {
      const r = await httpGet(options.httpPort, "/nothing-here");
      expect(r.status).toBe(503);
      expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(r.body).toBe(page);
    } finally {
      await hx.stop();
      setup.cleanup();
    }
  });
});
