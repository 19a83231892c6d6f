/*
 * Per-Service settings shown in traffic through a real HAProxy: each annotation's behaviour, not
 * its config text. One HAProxy serves every Service; clients come from 127.0.0.1 or 127.0.0.2.
 */

import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SETTING_ANNOTATIONS as A } from "../../shared/core/model/backend-settings.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { parseRenderOptions } from "../../shared/core/settings/options.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { cliCommand } from "../../shared/adapters/haproxy/cli.js";
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
import { echoBackend, freePort, tcpGreeter, waitFor, type EchoBackend } from "../support/net.js";
import { appPod, get, h2Get, h2Pod, proxyProtocolPod, tlsPod, type AppPod, type Pod } from "../support/pods.js";
import { makePki, type TestPki } from "../support/tls.js";

const renderer = new Renderer(loadTemplates());

/** A Service whose endpoints are loopback pods on the given ports. */
function exposed(name: string, ports: number[], annotations: Record<string, string> = {}, servicePort = 80) {
  return [
    service(name, [{ port: servicePort, name: "web" }], { annotations }),
    ...ports.map((p, i) => slice(name, [{ name: "web", port: p }], ["127.0.0.1"], { name: `${name}-${i}` })),
  ];
}

function httpsGet(port: number, path: string, ca: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: "127.0.0.1", port, path, servername: "lb.test", ca, agent: false, headers: { host: "lb.test" } },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Bytes a TCP client receives before the connection ends. */
function tcpRead(port: number, from: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: "127.0.0.1", localAddress: from });
    let data = "";
    s.on("data", (c) => (data += c.toString()));
    s.on("close", () => resolve(data));
    s.on("error", reject);
  });
}

/** The last check result of each server of a backend in service (not in maintenance): L7OK, L4CON, L6RSP, … */
async function checkStatusOf(socket: string, backend: string): Promise<string[]> {
  const [header, ...rows] = (await cliCommand(socket, "show stat"))
    .replace(/^# /, "")
    .trim()
    .split("\n")
    .map((l) => l.split(","));
  const col = (name: string) => header!.indexOf(name);
  return rows
    .filter((r) => r[col("pxname")] === backend && r[col("svname")] !== "BACKEND" && r[col("status")] !== "MAINT")
    .map((r) => r[col("check_status")]!);
}

describe("per-Service settings through a real HAProxy", () => {
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let pki: TestPki;
  let port: number;
  let httpsPort: number;
  let tcpPort: number;
  const pods: Pod[] = [];
  let slow: AppPod, healthy: AppPod, flaky: AppPod, queued: AppPod, plain: AppPod;
  let proxyV1: Awaited<ReturnType<typeof proxyProtocolPod>>, proxyV2: Awaited<ReturnType<typeof proxyProtocolPod>>;
  let h2: Awaited<ReturnType<typeof h2Pod>>;

  const checkStatus = (backend: string) => checkStatusOf(setup.options.statsSocket, backend);

  beforeAll(async () => {
    requireHaproxy();
    slow = await appPod("slow");
    healthy = await appPod("healthy");
    flaky = await appPod("flaky");
    queued = await appPod("queued");
    plain = await appPod("plain");
    proxyV1 = await proxyProtocolPod();
    proxyV2 = await proxyProtocolPod();
    h2 = await h2Pod();
    const greeter = await tcpGreeter("db");
    tcpPort = await freePort();
    httpsPort = await freePort();
    setup = await loopbackOptions();
    pki = makePki(setup.dir);
    const tls = await tlsPod(pki.serverPem);
    pods.push(slow, healthy, flaky, queued, plain, proxyV1, proxyV2, h2, tls, greeter);
    const options = parseRenderOptions({
      ...setup.options,
      selector: undefined,
      tcpServices: `db:${tcpPort}`,
      sslCert: pki.serverPem,
      httpsPort,
    });
    port = options.httpPort;
    const items = [
      ...exposed("slow", [slow.port], { [A.timeoutServer]: "300ms", [A.timeoutTunnel]: "1500ms" }),
      ...exposed("checked", [healthy.port, flaky.port], { [A.checkHttp]: "/healthz 200" }),
      ...exposed("private", [plain.port], {
        [A.allowSourceRange]: "127.0.0.2/32, fd00::/8",
        "serviceloadbalancer/lb.host": "private.test",
      }),
      ...exposed("blocked", [plain.port], { [A.denySourceRange]: "127.0.0.2" }),
      ...exposed("open", [plain.port]),
      ...exposed("limited", [plain.port], { [A.rateLimitRps]: "5" }),
      ...exposed("limited503", [plain.port], { [A.rateLimitRps]: "1", [A.rateLimitStatus]: "503" }),
      ...exposed("queued", [queued.port], { [A.maxconn]: "1", [A.timeoutQueue]: "1s" }),
      ...exposed("pp1", [proxyV1.port], { [A.proxyProtocol]: "v1" }),
      ...exposed("pp2", [proxyV2.port], { [A.proxyProtocol]: "v2" }),
      ...exposed("grpc", [h2.port], { [A.backendProtocol]: "h2" }),
      ...exposed("tls1", [tls.port], { [A.backendProtocol]: "h1-ssl", "serviceloadbalancer/lb.host": "one.test" }),
      ...exposed("tls2", [tls.port], { [A.backendProtocol]: "h2-ssl", "serviceloadbalancer/lb.host": "two.test" }),
      ...exposed("tls1checked", [tls.port], { [A.backendProtocol]: "h1-ssl", [A.checkHttp]: "/healthz" }),
      ...exposed("tls2checked", [tls.port], { [A.backendProtocol]: "h2-ssl", [A.checkHttp]: "/healthz" }),
      ...exposed("grpcchecked", [h2.port], { [A.backendProtocol]: "h2", [A.checkHttp]: "/healthz" }),
      ...exposed("pay", [plain.port], { "serviceloadbalancer/lb.sslTerm": "true", [A.sslRedirectCode]: "308" }),
      ...exposed("legacy", [plain.port], { "serviceloadbalancer/lb.sslTerm": "true", [A.sslRedirect]: "false" }),
      ...exposed("db", [greeter.port], { [A.allowSourceRange]: "127.0.0.2" }, tcpPort),
    ];
    const { config, warnings } = renderSnapshot(snapshotFromDocuments([list(items)]), options, renderer);
    expect(warnings).toEqual([]);
    expect(haproxyCheck(config, setup.dir)).toMatchObject({ ok: true });
    hx = await runHaproxy(config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await Promise.all(pods.map((p) => p.close()));
    setup?.cleanup();
  });

  it("lb.timeout-server: a pod slower than it gets 504, a faster one answers", async () => {
    expect((await get(port, "/slow/x?ms=10")).status).toBe(200);
    const late = await get(port, "/slow/x?ms=1500");
    expect(late.status).toBe(504);
  });

  it("lb.timeout-tunnel: an upgraded connection lives past timeout-server, idle up to timeout-tunnel", async () => {
    const sock: Socket = connect(port, "127.0.0.1");
    let data = "";
    sock.on("data", (c) => (data += c.toString()));
    const closed = new Promise<number>((resolve) => sock.on("close", () => resolve(Date.now())));
    sock.write("GET /slow/ws HTTP/1.1\r\nHost: lb\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n");
    await waitFor("the upgrade", async () => (data.includes("101 Switching Protocols") ? true : undefined));
    // Idle for more than timeout-server (300ms), then the tunnel still carries data.
    await new Promise((r) => setTimeout(r, 900));
    sock.write("ping");
    await waitFor("the echo", async () => (data.endsWith("ping") ? true : undefined));
    const lastActivity = Date.now();
    // Idle past timeout-tunnel (1500ms): HAProxy closes it.
    const at = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(-1), 6000))]);
    expect(at).toBeGreaterThan(0);
    expect(at - lastActivity).toBeGreaterThanOrEqual(1000);
    sock.destroy();
  });

  it("lb.check-http: a pod whose /healthz answers 500 is taken out while its port is open, and back when it answers 200", async () => {
    const answered = async (n: number) =>
      new Set(
        await Promise.all(Array.from({ length: n }, async () => (await get(port, "/checked/")).body.split(" ")[0])),
      );
    await waitFor("both pods serving", async () => ((await answered(6)).size === 2 ? true : undefined), 15_000);
    flaky.health = 500;
    await waitFor(
      "the failing pod taken out",
      async () => {
        const who = await answered(6);
        return who.size === 1 && who.has("healthy") ? true : undefined;
      },
      15_000,
    );
    // It stays out: its port is open, but its check says no.
    expect([...(await answered(8))]).toEqual(["healthy"]);
    flaky.health = 200;
    await waitFor("the pod back", async () => ((await answered(6)).has("flaky") ? true : undefined), 15_000);
  });

  it("lb.allow-source-range: a client outside the list gets 403, by path and by host; other Services are unaffected", async () => {
    expect((await get(port, "/private/", { from: "127.0.0.1" })).status).toBe(403);
    expect((await get(port, "/", { from: "127.0.0.1", host: "private.test" })).status).toBe(403);
    expect((await get(port, "/private/", { from: "127.0.0.2" })).status).toBe(200);
    expect((await get(port, "/", { from: "127.0.0.2", host: "private.test" })).body).toBe("plain /");
    expect((await get(port, "/open/", { from: "127.0.0.1" })).status).toBe(200);
  });

  it("lb.deny-source-range: a client inside the list gets 403, others are served", async () => {
    expect((await get(port, "/blocked/", { from: "127.0.0.2" })).status).toBe(403);
    expect((await get(port, "/blocked/", { from: "127.0.0.1" })).status).toBe(200);
  });

  it("lb.allow-source-range on a TCP Service: a client outside the list is cut off before the pod is reached", async () => {
    expect(await tcpRead(tcpPort, "127.0.0.2")).toBe("db\n");
    expect(await tcpRead(tcpPort, "127.0.0.1")).toBe("");
  });

  it("lb.rate-limit-rps: requests above the rate get 429; another client of the same Service is unaffected", async () => {
    const burst = await Promise.all(Array.from({ length: 12 }, () => get(port, "/limited/", { from: "127.0.0.1" })));
    const statuses = burst.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(6);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(6);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    expect((await get(port, "/limited/", { from: "127.0.0.2" })).status).toBe(200);
    expect((await get(port, "/open/", { from: "127.0.0.1" })).status).toBe(200);
  });

  it("lb.rate-limit-status: the status answered above the rate", async () => {
    const burst = await Promise.all(Array.from({ length: 4 }, () => get(port, "/limited503/", { from: "127.0.0.1" })));
    expect(burst.map((r) => r.status).filter((s) => s === 503).length).toBeGreaterThanOrEqual(2);
  });

  it("lb.maxconn: connections above it queue (the pod never sees two at once); past lb.timeout-queue they get 503", async () => {
    const three = await Promise.all(Array.from({ length: 3 }, () => get(port, "/queued/?ms=200")));
    expect(three.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(queued.maxInFlight).toBe(1);
    const two = await Promise.all(Array.from({ length: 2 }, () => get(port, "/queued/?ms=2500")));
    expect(two.map((r) => r.status).sort()).toEqual([200, 503]);
    expect(queued.maxInFlight).toBe(1);
  });

  it.each([
    ["v1", "/pp1/"],
    ["v2", "/pp2/"],
  ])("lb.proxy-protocol %s: the pod reads the client's own address and port in the PROXY header", async (_v, path) => {
    const r = await get(port, path, { from: "127.0.0.2" });
    expect(r.status).toBe(200);
    expect(r.body).toBe(r.local);
  });

  it("lb.backend-protocol h2: a gRPC-style exchange (HTTP/2 on both sides, trailers) works end to end", async () => {
    const r = await h2Get(port, "/grpc/pkg.Svc/Call");
    expect(r.status).toBe(200);
    expect(r.body).toBe("h2 pod");
    expect(r.trailers["grpc-status"]).toBe("0");
    expect(r.trailers["grpc-message"]).toBe("path /pkg.Svc/Call");
    // An HTTP/1.1 client reaches the same pod over HTTP/2 too.
    expect((await get(port, "/grpc/x")).body).toBe("h2 pod");
    expect(h2.versions.length).toBeGreaterThanOrEqual(2);
  });

  it.each([
    ["h1-ssl", "one.test", "sni=one.test alpn=http/1.1 http=1.1"],
    ["h2-ssl", "two.test", "sni=two.test alpn=h2 http=2.0"],
  ])("lb.backend-protocol %s: TLS to the pod, with the request's host as SNI", async (_p, host, expected) => {
    const r = await get(port, "/", { host });
    expect(r.status).toBe(200);
    expect(r.body).toBe(expected);
  });

  it("lb.check-http with lb.backend-protocol: the checks speak TLS and the pod's HTTP version, and pass", async () => {
    for (const backend of ["default_grpcchecked_80", "default_tls1checked_80", "default_tls2checked_80"]) {
      await waitFor(
        `${backend}'s check`,
        async () => ((await checkStatus(backend)).join() === "L7OK" ? true : undefined),
        10_000,
      );
    }
    expect((await get(port, "/tls1checked/")).body).toMatch(/ alpn=http\/1\.1 http=1\.1$/);
    expect((await get(port, "/tls2checked/")).body).toMatch(/ alpn=h2 http=2\.0$/);
  });

  it("lb.ssl-redirect-code: plain HTTP requests to a TLS Service are redirected with that status", async () => {
    const r = await get(port, "/pay/x");
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe(`https://127.0.0.1:${httpsPort}/pay/x`);
    expect((await httpsGet(httpsPort, "/pay/x", pki.ca)).body).toBe("plain /x");
  });

  it("lb.ssl-redirect: false serves a TLS Service in clear text too", async () => {
    expect((await get(port, "/legacy/y")).body).toBe("plain /y");
    expect((await httpsGet(httpsPort, "/legacy/y", pki.ca)).body).toBe("plain /y");
  });
});

/** A raw exchange from a chosen local address: what the client writes first, the whole answer back ("reset" if HAProxy resets it unanswered). */
function rawExchange(port: number, from: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ port, host: "127.0.0.1", localAddress: from }, () => s.write(text));
    let data = "";
    s.on("data", (c) => (data += c.toString()));
    s.on("close", () => resolve(data));
    s.on("error", (e: NodeJS.ErrnoException) =>
      e.code === "ECONNRESET" && data === "" ? resolve("reset") : reject(e),
    );
  });
}

/** The subject CN of the certificate HAProxy presents for an SNI name. */
function certificateFor(port: number, servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // From an address that is not a trusted proxy: no PROXY header expected.
    const raw = connect({ port, host: "127.0.0.1", localAddress: "127.0.0.2" });
    const s = tlsConnect({ socket: raw, servername, rejectUnauthorized: false }, () => {
      const cn = s.getPeerCertificate().subject.CN;
      s.end();
      resolve(Array.isArray(cn) ? cn.join() : String(cn));
    });
    s.on("error", reject);
  });
}

describe("per-frontend flags through a real HAProxy", () => {
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let echo: EchoBackend;
  let port: number;
  let httpsPort: number;

  beforeAll(async () => {
    requireHaproxy();
    echo = await echoBackend("echo");
    httpsPort = await freePort();
    setup = await loopbackOptions();
    // Two certificates in one directory, as a mounted Secret holds them; the first by name is the default.
    const certs = join(setup.dir, "certs");
    mkdirSync(certs);
    for (const host of ["a.test", "b.test"]) {
      const dir = join(setup.dir, host);
      mkdirSync(dir);
      copyFileSync(makePki(dir, host).serverPem, join(certs, `${host}.pem`));
    }
    const options = parseRenderOptions({
      ...setup.options,
      selector: undefined,
      tcpServices: "",
      acceptProxy: "127.0.0.1/32",
      sslCert: certs,
      httpsPort,
    });
    port = options.httpPort;
    const items = [
      ...exposed("partner", [echo.port], { [A.allowSourceRange]: "203.0.113.0/24" }),
      ...exposed("open", [echo.port]),
      ...exposed("secure", [echo.port], { "serviceloadbalancer/lb.sslTerm": "true" }),
    ];
    const { config, warnings } = renderSnapshot(snapshotFromDocuments([list(items)]), options, renderer);
    expect(warnings).toEqual([]);
    expect(haproxyCheck(config, setup.dir)).toMatchObject({ ok: true });
    hx = await runHaproxy(config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await echo?.close();
    setup?.cleanup();
  });

  const request = (path: string) => `GET ${path} HTTP/1.1\r\nHost: lb.test\r\nConnection: close\r\n\r\n`;

  it("--accept-proxy: behind a trusted proxy, allow lists and X-Forwarded-For see the client the PROXY header names", async () => {
    const v1 = await rawExchange(
      port,
      "127.0.0.1",
      `PROXY TCP4 203.0.113.7 127.0.0.1 40000 80\r\n${request("/partner/x")}`,
    );
    expect(v1).toMatch(/^HTTP\/1\.1 200 /);
    expect(echo.seen.at(-1)!.headers["x-forwarded-for"]).toBe("203.0.113.7");
    const outside = await rawExchange(
      port,
      "127.0.0.1",
      `PROXY TCP4 198.51.100.1 127.0.0.1 40000 80\r\n${request("/partner/x")}`,
    );
    expect(outside).toMatch(/^HTTP\/1\.1 403 /);
  });

  it("--accept-proxy: a trusted address must send the header (HAProxy closes the connection otherwise); others need none", async () => {
    expect(await rawExchange(port, "127.0.0.1", request("/open/"))).toMatch(/^(reset)?$/);
    expect(await rawExchange(port, "127.0.0.2", request("/open/"))).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("--accept-proxy: a PROXY header from an untrusted address is not believed", async () => {
    const forged = await rawExchange(
      port,
      "127.0.0.2",
      `PROXY TCP4 203.0.113.7 127.0.0.1 40000 80\r\n${request("/partner/x")}`,
    );
    expect(forged).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("--ssl-cert naming a directory: HAProxy picks the certificate by SNI, the first by name for any other host", async () => {
    expect(await certificateFor(httpsPort, "b.test")).toBe("b.test");
    expect(await certificateFor(httpsPort, "a.test")).toBe("a.test");
    expect(await certificateFor(httpsPort, "unknown.test")).toBe("a.test");
  });
});

describe("--ssl-cert crt-list:<file> through a real HAProxy", () => {
  it("picks the certificate by the list's SNI filters, and serves its first line's to any other host", async () => {
    requireHaproxy();
    const echo = await echoBackend("echo");
    const httpsPort = await freePort();
    const setup = await loopbackOptions();
    try {
      const certs = join(setup.dir, "certs");
      mkdirSync(certs);
      for (const host of ["a.test", "b.test"]) {
        const dir = join(setup.dir, host);
        mkdirSync(dir);
        copyFileSync(makePki(dir, host).serverPem, join(certs, `${host}.pem`));
      }
      // Not the order of the file names, and a name that is in neither certificate: the list decides.
      const crtList = join(setup.dir, "certs.list");
      writeFileSync(crtList, `${join(certs, "b.test.pem")} b.test\n${join(certs, "a.test.pem")} a.test alias.test\n`);
      const options = parseRenderOptions({
        ...setup.options,
        selector: undefined,
        tcpServices: "",
        sslCert: `crt-list:${crtList}`,
        httpsPort,
      });
      const { config, warnings } = renderSnapshot(
        snapshotFromDocuments([list(exposed("secure", [echo.port], { "serviceloadbalancer/lb.sslTerm": "true" }))]),
        options,
        renderer,
      );
      expect(warnings).toEqual([]);
      expect(config).toContain(`ssl crt-list ${crtList}`);
      const hx = await runHaproxy(config, setup.dir);
      try {
        expect(await certificateFor(httpsPort, "a.test")).toBe("a.test");
        expect(await certificateFor(httpsPort, "alias.test")).toBe("a.test");
        expect(await certificateFor(httpsPort, "b.test")).toBe("b.test");
        expect(await certificateFor(httpsPort, "unknown.test")).toBe("b.test");
      } finally {
        await hx.stop();
      }
    } finally {
      await echo.close();
      setup.cleanup();
    }
  });
});

describe("global defaults of per-Service settings through a real HAProxy", () => {
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let echo: EchoBackend;
  let port: number;

  beforeAll(async () => {
    requireHaproxy();
    echo = await echoBackend("echo");
    setup = await loopbackOptions();
    const options = parseRenderOptions({
      ...setup.options,
      selector: undefined,
      tcpServices: "",
      sslCert: makePki(setup.dir).serverPem,
      httpsPort: await freePort(),
      allowSourceRange: "127.0.0.2",
      denySourceRange: "127.0.0.3/32",
      rateLimitRps: "2",
      rateLimitStatus: "503",
      sslRedirectCode: "308",
    });
    port = options.httpPort;
    const items = [
      ...exposed("plain", [echo.port]),
      ...exposed("own", [echo.port], {
        [A.allowSourceRange]: "127.0.0.1,127.0.0.3",
        [A.denySourceRange]: "127.0.0.9",
        [A.rateLimitRps]: "1000",
      }),
      ...exposed("status", [echo.port], { [A.allowSourceRange]: "127.0.0.1", [A.rateLimitStatus]: "429" }),
      ...exposed("secure", [echo.port], { "serviceloadbalancer/lb.sslTerm": "true" }),
      ...exposed("secure302", [echo.port], {
        "serviceloadbalancer/lb.sslTerm": "true",
        [A.sslRedirectCode]: "302",
      }),
    ];
    const { config, warnings } = renderSnapshot(snapshotFromDocuments([list(items)]), options, renderer);
    expect(warnings).toEqual([]);
    hx = await runHaproxy(config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await echo?.close();
    setup?.cleanup();
  });

  it("--allow-source-range and --deny-source-range apply to every Service; its own annotations replace them", async () => {
    expect((await get(port, "/plain/", { from: "127.0.0.2" })).status).toBe(200);
    expect((await get(port, "/plain/", { from: "127.0.0.1" })).status).toBe(403);
    expect((await get(port, "/own/", { from: "127.0.0.1" })).status).toBe(200);
    expect((await get(port, "/own/", { from: "127.0.0.2" })).status).toBe(403);
    // The Service's deny list replaced the global one, which refuses 127.0.0.3.
    expect((await get(port, "/own/", { from: "127.0.0.3" })).status).toBe(200);
  });

  it("--rate-limit-rps and --rate-limit-status apply to every HTTP Service; lb.rate-limit-* replace them", async () => {
    const burst = (path: string, from: string) =>
      Promise.all(Array.from({ length: 8 }, () => get(port, path, { from }))).then((rs) => rs.map((r) => r.status));
    const plain = await burst("/plain/", "127.0.0.2");
    expect(plain.filter((s) => s === 503).length).toBeGreaterThanOrEqual(4);
    expect(plain.every((s) => s === 200 || s === 503)).toBe(true);
    expect((await burst("/own/", "127.0.0.1")).every((s) => s === 200)).toBe(true);
    const status = await burst("/status/", "127.0.0.1");
    expect(status.filter((s) => s === 429).length).toBeGreaterThanOrEqual(4);
    expect(status.every((s) => s === 200 || s === 429)).toBe(true);
  });

  it("--ssl-redirect-code is the redirect of lb.sslTerm Services; lb.ssl-redirect-code replaces it", async () => {
    expect((await get(port, "/secure/", { from: "127.0.0.2" })).status).toBe(308);
    expect((await get(port, "/secure302/", { from: "127.0.0.2" })).status).toBe(302);
  });
});

describe("access lists that cannot be applied as written fail closed, through a real HAProxy", () => {
  let setup: LoopbackSetup;
  let hx: RunningHaproxy;
  let echo: EchoBackend;
  let port: number;
  let tcpPort: number;
  let warnings: Array<{ service: string; annotation?: string; message: string }>;
  const pods: Pod[] = [];
  /** `n` CIDRs that hold no loopback client, then `last`. */
  const longList = (n: number, last: string) =>
    [...Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`), last].join(",");

  beforeAll(async () => {
    requireHaproxy();
    echo = await echoBackend("echo");
    const greeter = await tcpGreeter("db");
    tcpPort = await freePort();
    setup = await loopbackOptions();
    const options = parseRenderOptions({ ...setup.options, selector: undefined, tcpServices: `closed-db:${tcpPort}` });
    port = options.httpPort;
    const items = [
      ...exposed("control", [echo.port], { [A.allowSourceRange]: "10.9.9.9/32" }),
      ...exposed("allow-typo", [echo.port], { [A.allowSourceRange]: "10.9.9.9/32,10.1.1.1/33" }),
      ...exposed("allow-some", [echo.port], { [A.allowSourceRange]: "127.0.0.2,10.1.1.1/33" }),
      // 127.0.0.2 is among the first 10,000 entries, 127.0.0.1 is the 10,001st.
      ...exposed("allow-long", [echo.port], { [A.allowSourceRange]: `127.0.0.2,${longList(9_999, "127.0.0.1")}` }),
      ...exposed("deny-typo", [echo.port], { [A.denySourceRange]: "127.0.0.1,bogus" }),
      ...exposed("deny-long", [echo.port], { [A.denySourceRange]: longList(10_001, "127.0.0.1") }),
      ...exposed("deny-mapped", [echo.port], { [A.denySourceRange]: "::ffff:127.0.0.1" }),
      ...exposed("closed-db", [greeter.port], { [A.denySourceRange]: "127.0.0.1,bogus" }, tcpPort),
    ];
    const rendered = renderSnapshot(snapshotFromDocuments([list(items)]), options, renderer);
    warnings = rendered.warnings;
    pods.push(greeter);
    hx = await runHaproxy(rendered.config, setup.dir);
  });

  afterAll(async () => {
    await hx?.stop();
    await echo?.close();
    await Promise.all(pods.map((p) => p.close()));
    setup?.cleanup();
  });

  const status = async (path: string, from: string) => (await get(port, path, { from })).status;

  it("an allow list with a bad entry keeps its valid entries: no one outside them gets in", async () => {
    expect(await status("/control/", "127.0.0.1")).toBe(403);
    expect(await status("/allow-typo/", "127.0.0.1")).toBe(403);
    expect(await status("/allow-some/", "127.0.0.1")).toBe(403);
    expect(await status("/allow-some/", "127.0.0.2")).toBe(200);
    expect(warnings).toContainEqual({
      service: "default/allow-typo",
      annotation: A.allowSourceRange,
      message: '"10.1.1.1/33" is not an address or CIDR: dropped, the remaining 1 apply',
    });
  });

  it("an allow list of 10,001 entries keeps the first 10,000", async () => {
    expect(await status("/allow-long/", "127.0.0.2")).toBe(200);
    expect(await status("/allow-long/", "127.0.0.1")).toBe(403);
  });

  it("a deny list with a bad entry, or over the cap, refuses every client of its Service and no other", async () => {
    for (const from of ["127.0.0.1", "127.0.0.2"]) {
      expect(await status("/deny-typo/", from)).toBe(403);
      expect(await status("/deny-long/", from)).toBe(403);
    }
    expect(await tcpRead(tcpPort, "127.0.0.2")).toBe("");
    expect(warnings.filter((w) => w.annotation === A.denySourceRange).map((w) => w.service)).toEqual([
      "default/closed-db",
      "default/deny-long",
      "default/deny-typo",
    ]);
  });

  it("an IPv4-mapped IPv6 entry denies the IPv4 client it maps", async () => {
    expect(await status("/deny-mapped/", "127.0.0.1")).toBe(403);
    expect(await status("/deny-mapped/", "127.0.0.2")).toBe(200);
  });
});

describe("global access lists that cannot be applied as written", () => {
  it.each([
    ["allow", "a bad entry", "SERVICELB_ALLOW_SOURCE_RANGE", "127.0.0.2,10.1.1.1/33", '"10.1.1.1/33"'],
    ["deny", "a bad entry", "SERVICELB_DENY_SOURCE_RANGE", "127.0.0.1,bogus", '"bogus"'],
    [
      "deny",
      "10,001 entries",
      "SERVICELB_DENY_SOURCE_RANGE",
      Array.from({ length: 10_001 }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`).join(","),
      "10001 entries; at most 10000",
    ],
  ])(
    "--%s-source-range with %s: the function refuses to start, so it publishes nothing",
    (kind, _, variable, value, why) => {
      expect(() => loadFunctionSettings({ [variable]: value })).toThrow(
        new RegExp(`--${kind}-source-range: .*${why.replace(/[.*/]/g, "\\$&")}`),
      );
    },
  );

  it("--deny-source-range ::ffff:127.0.0.1 denies the IPv4 client", async () => {
    requireHaproxy();
    const echo = await echoBackend("echo");
    const setup = await loopbackOptions();
    try {
      const options = parseRenderOptions({
        ...setup.options,
        selector: undefined,
        tcpServices: "",
        denySourceRange: "::ffff:127.0.0.1",
      });
      const { config } = renderSnapshot(
        snapshotFromDocuments([list(exposed("plain", [echo.port]))]),
        options,
        renderer,
      );
      const hx = await runHaproxy(config, setup.dir);
      try {
        expect((await get(options.httpPort, "/plain/", { from: "127.0.0.1" })).status).toBe(403);
        expect((await get(options.httpPort, "/plain/", { from: "127.0.0.2" })).status).toBe(200);
      } finally {
        await hx.stop();
      }
    } finally {
      await echo.close();
      setup.cleanup();
    }
  });
});
