import { describe, expect, it } from "vitest";
import {
  DEFAULT_BACKEND_SETTINGS,
  parseBackendSettings,
  parseHttpCheck,
  settingDefaults,
  settingsFor,
  SETTING_ANNOTATIONS as A,
} from "../../../../shared/core/model/backend-settings.js";
import { parseSourceRanges } from "../../../../shared/core/model/source-ranges.js";
import { parseTimeout } from "../../../../shared/core/render/haproxy-time.js";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";

describe("grammars", () => {
  it.each([
    ["500ms", "500ms"],
    ["30s", "30s"],
    ["0030s", "30s"],
    ["1m", "1m"],
    ["24h", "24h"],
    ["1d", "1d"],
  ])("timeout %s is %s", (raw, out) => expect(parseTimeout(raw)).toBe(out));

  it.each([
    "",
    "0s",
    "30",
    "25h",
    "2d",
    "1.5s",
    "30 s",
    "30S",
    "-1s",
    "10us",
    "1s\n    server x 1.2.3.4:80",
    "9999999999ms",
  ])("timeout %j is refused", (raw) => {
    expect(parseTimeout(raw)).toBeNull();
  });

  it.each([
    ["/healthz", { uri: "/healthz", status: null }],
    ["/", { uri: "/", status: null }],
    ["/ready?full=1&x=%2F 204", { uri: "/ready?full=1&x=%2F", status: 204 }],
    ["/a/b/ 200", { uri: "/a/b/", status: 200 }],
  ])("check %j", (raw, out) => expect(parseHttpCheck(raw)).toEqual(out));

  it.each([
    "healthz",
    "/h 99",
    "/h 600",
    "/h  200",
    "/h 200 ",
    "/h#x",
    "/h\n    option x",
    '/h"',
    "/${HOME}",
    "/%zz",
    "/a b",
    `/${"x".repeat(300)}`,
  ])("check %j is refused", (raw) => {
    expect(parseHttpCheck(raw)).toHaveProperty("error");
  });

  it("source ranges: IPv4 and IPv6, addresses and CIDRs, spaces around commas, duplicates once, IPv6 lower-cased", () => {
    expect(parseSourceRanges("10.0.0.0/8, 192.168.1.7 ,FD00::/8,2001:db8::1/128,10.0.0.0/8")).toEqual([
      "10.0.0.0/8",
      "192.168.1.7",
      "fd00::/8",
      "2001:db8::1/128",
    ]);
  });

  it.each([
    "",
    "10.0.0.0/33",
    "fd00::/129",
    "010.0.0.1",
    "10.0.0.0/08",
    "fe80::1%eth0",
    "::10.0.0.1",
    "10.0.0.0/8,",
    "10.0.0.0/8 10.1.0.0/16",
    "host.example",
    "10.0.0.0/8\n",
  ])("source range %j is refused", (raw) => {
    expect(parseSourceRanges(raw)).toHaveProperty("error");
  });

  const ranges = (n: number) => Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`).join(",");

  it("an annotation's list goes to a pattern file: 10,000 entries, not 10,001", () => {
    expect(parseSourceRanges(ranges(10_000))).toHaveLength(10_000);
    expect(parseSourceRanges(ranges(10_001))).toEqual({ error: "10001 entries; at most 10000" });
  });

  it("a list on one config line (--accept-proxy) keeps HAProxy's 64 words per line: 60 entries", () => {
    expect(parseSourceRanges(ranges(60), 60)).toHaveLength(60);
    expect(parseSourceRanges(ranges(61), 60)).toEqual({ error: "61 entries; at most 60 fit on one HAProxy line" });
  });
});

describe("parseBackendSettings", () => {
  it("no annotations: the defaults, no warnings", () => {
    expect(parseBackendSettings({}, false)).toEqual({ settings: DEFAULT_BACKEND_SETTINGS, given: [], warnings: [] });
  });

  it("reads every annotation", () => {
    const { settings, warnings } = parseBackendSettings(
      {
        [A.timeoutServer]: "2s",
        [A.timeoutConnect]: "300ms",
        [A.timeoutClient]: "1h",
        [A.timeoutTunnel]: "2h",
        [A.timeoutQueue]: "5s",
        [A.checkHttp]: "/healthz 200",
        [A.allowSourceRange]: "10.0.0.0/8",
        [A.denySourceRange]: "10.1.0.0/16",
        [A.rateLimitRps]: "50",
        [A.rateLimitStatus]: "503",
        [A.maxconn]: "100",
        [A.backendProtocol]: "h2-ssl",
        [A.proxyProtocol]: "v2",
        [A.sslRedirect]: "true",
        [A.sslRedirectCode]: "308",
      },
      true,
    );
    expect(warnings).toEqual([]);
    expect(settings).toEqual({
      timeoutServer: "2s",
      timeoutConnect: "300ms",
      timeoutClient: "1h",
      timeoutTunnel: "2h",
      timeoutQueue: "5s",
      check: true,
      checkHttp: { uri: "/healthz", status: 200 },
      allowSources: ["10.0.0.0/8"],
      denySources: ["10.1.0.0/16"],
      rateLimit: { rps: 50, status: 503 },
      maxconn: 100,
      backendProtocol: "h2-ssl",
      proxyProtocol: "v2",
      sslRedirect: 308,
    });
  });

  it("health checks are off unless lb.check, lb.check-http or --active-checks turns them on", () => {
    const defaults = settingDefaults(parseRenderOptions({ activeChecks: "true" }));
    expect(parseBackendSettings({}, false).settings.check).toBe(false);
    expect(parseBackendSettings({ [A.check]: "true" }, false).settings.check).toBe(true);
    expect(parseBackendSettings({ [A.checkHttp]: "/healthz" }, false).settings.check).toBe(true);
    expect(parseBackendSettings({}, false, defaults).settings.check).toBe(true);
    expect(parseBackendSettings({ [A.check]: "false" }, false, defaults).settings.check).toBe(false);
    const off = parseBackendSettings({ [A.check]: "false", [A.checkHttp]: "/healthz" }, false);
    expect(off.settings).toMatchObject({ check: false, checkHttp: null });
    expect(off.warnings).toEqual([{ annotation: A.checkHttp, message: "ignored: lb.check is false" }]);
    expect(parseBackendSettings({ [A.check]: "yes please" }, false).warnings[0]!.message).toMatch(/not a boolean/);
  });

  it.each([
    [A.timeoutServer, "forever"],
    [A.rateLimitRps, "0"],
    [A.rateLimitRps, "1e3"],
    [A.maxconn, "100001"],
    [A.maxconn, "-1"],
    [A.backendProtocol, "grpc"],
    [A.proxyProtocol, "v3"],
    [A.sslRedirect, "yes"],
    [A.sslRedirectCode, "300"],
    [A.rateLimitStatus, "418"],
  ])("an invalid %s (%j) is ignored with a warning naming it", (annotation, value) => {
    const { settings, warnings } = parseBackendSettings(
      { [annotation]: value, [A.rateLimitRps]: annotation === A.rateLimitStatus ? "5" : (value as string) },
      true,
    );
    expect(warnings.map((w) => w.annotation)).toContain(annotation);
    expect(warnings.find((w) => w.annotation === annotation)!.message).toMatch(/ignored$/);
    if (annotation === A.rateLimitStatus) expect(settings.rateLimit).toEqual({ rps: 5, status: 429 });
  });

  it("lb.rate-limit-status without lb.rate-limit-rps is ignored with a warning", () => {
    const { settings, warnings } = parseBackendSettings({ [A.rateLimitStatus]: "503" }, false);
    expect(settings.rateLimit).toBeNull();
    expect(warnings).toEqual([{ annotation: A.rateLimitStatus, message: `ignored: ${A.rateLimitRps} is not set` }]);
  });

  it("lb.ssl-redirect: false serves clear text too; without lb.sslTerm the redirect annotations mean nothing", () => {
    expect(parseBackendSettings({ [A.sslRedirect]: "false" }, true).settings.sslRedirect).toBeNull();
    const off = parseBackendSettings({ [A.sslRedirect]: "false", [A.sslRedirectCode]: "302" }, true);
    expect(off.warnings).toEqual([{ annotation: A.sslRedirectCode, message: "ignored: lb.ssl-redirect is false" }]);
    const plain = parseBackendSettings({ [A.sslRedirect]: "false", [A.sslRedirectCode]: "302" }, false);
    expect(plain.settings.sslRedirect).toBe(301);
    expect(plain.warnings.map((w) => w.annotation)).toEqual([A.sslRedirect, A.sslRedirectCode]);
  });

  it("settings of the other mode are dropped per port, with a warning each", () => {
    const parsed = parseBackendSettings({ [A.rateLimitRps]: "5", [A.timeoutClient]: "1h", [A.maxconn]: "3" }, false);
    const tcp = settingsFor(parsed, "tcp");
    expect(tcp.settings).toMatchObject({ rateLimit: null, timeoutClient: "1h", maxconn: 3 });
    expect(tcp.ignored.map((w) => w.annotation)).toEqual([A.rateLimitRps]);
    const http = settingsFor(parsed, "http");
    expect(http.settings).toMatchObject({ rateLimit: { rps: 5, status: 429 }, timeoutClient: null, maxconn: 3 });
    expect(http.ignored.map((w) => w.annotation)).toEqual([A.timeoutClient]);
  });
});

describe("global defaults (--allow-source-range, --deny-source-range, --rate-limit-*, --ssl-redirect-code)", () => {
  const defaults = settingDefaults(
    parseRenderOptions({
      allowSourceRange: "10.0.0.0/8",
      denySourceRange: "10.9.0.0/16",
      rateLimitRps: "20",
      rateLimitStatus: "503",
      sslRedirectCode: "308",
    }),
  );

  it("are what a Service without annotations gets, one object for all", () => {
    const parsed = parseBackendSettings({}, true, defaults);
    expect(parsed.settings).toBe(defaults.settings);
    expect(parsed.settings).toMatchObject({
      allowSources: ["10.0.0.0/8"],
      denySources: ["10.9.0.0/16"],
      rateLimit: { rps: 20, status: 503 },
      sslRedirect: 308,
    });
    expect(settingDefaults(parseRenderOptions({})).settings).toBe(DEFAULT_BACKEND_SETTINGS);
  });

  it("are replaced by the Service's annotations, each on its own", () => {
    expect(parseBackendSettings({ [A.allowSourceRange]: "192.0.2.1" }, false, defaults).settings).toMatchObject({
      allowSources: ["192.0.2.1"],
      denySources: ["10.9.0.0/16"],
    });
    expect(parseBackendSettings({ [A.rateLimitRps]: "5" }, false, defaults).settings.rateLimit).toEqual({
      rps: 5,
      status: 503,
    });
    const status = parseBackendSettings({ [A.rateLimitStatus]: "429" }, false, defaults);
    expect(status.settings.rateLimit).toEqual({ rps: 20, status: 429 });
    expect(status.warnings).toEqual([]);
    expect(parseBackendSettings({ [A.sslRedirectCode]: "302" }, true, defaults).settings.sslRedirect).toBe(302);
    expect(parseBackendSettings({ [A.sslRedirect]: "false" }, true, defaults).settings.sslRedirect).toBeNull();
  });

  it("leave HTTP-only settings off TCP ports, without a warning", () => {
    const tcp = settingsFor(parseBackendSettings({}, false, defaults), "tcp");
    expect(tcp.ignored).toEqual([]);
    expect(tcp.settings).toMatchObject({ rateLimit: null, allowSources: ["10.0.0.0/8"] });
  });
});

describe("in the model", () => {
  const options = parseRenderOptions({ tcpServices: "db:3306", sslCert: "/etc/haproxy/lb.pem" });
  const build = (annotations: Record<string, string>) =>
    buildModel(
      snapshotFromDocuments([
        list([
          service(
            "db",
            [
              { port: 80, name: "web" },
              { port: 3306, name: "sql" },
            ],
            { annotations },
          ),
          slice(
            "db",
            [
              { name: "web", port: 8080 },
              { name: "sql", port: 3306 },
            ],
            ["10.0.0.1"],
          ),
        ]),
      ]),
      options,
    );

  it("each port's backend gets the settings of its mode; warnings name Service, port and annotation", () => {
    const m = build({ [A.rateLimitRps]: "5", [A.timeoutClient]: "2h", [A.timeoutServer]: "1m", [A.maxconn]: "oops" });
    const web = m.backends.find((b) => b.name === "default_db_80")!;
    const sql = m.backends.find((b) => b.name === "default_db_3306")!;
    expect(web.settings).toMatchObject({
      rateLimit: { rps: 5 },
      timeoutClient: null,
      timeoutServer: "1m",
      maxconn: null,
    });
    expect(sql.settings).toMatchObject({ rateLimit: null, timeoutClient: "2h", timeoutServer: "1m" });
    expect(m.tcpFrontends).toEqual([
      { name: "tcp_default_db_3306", port: 3306, backend: "default_db_3306", timeoutClient: "2h" },
    ]);
    expect(m.warnings).toEqual([
      { service: "default/db", annotation: A.maxconn, message: '"oops" is not an integer from 1 to 100000; ignored' },
      {
        service: "default/db",
        port: 80,
        annotation: A.timeoutClient,
        message: expect.stringMatching(/^ignored on this port: HTTP Services share the HTTP frontend/),
      },
      {
        service: "default/db",
        port: 3306,
        annotation: A.rateLimitRps,
        message: "ignored on this port: applies to HTTP ports only",
      },
    ]);
  });

  it("lb.sslTerm routes redirect with lb.ssl-redirect-code, or serve both frontends with lb.ssl-redirect: false", () => {
    const redirect = build({ "serviceloadbalancer/lb.sslTerm": "true", [A.sslRedirectCode]: "302" });
    expect(redirect.httpRoutes).toEqual([
      { backend: "default_db_80", match: { kind: "path", prefix: "/db" }, action: "https-redirect", redirectCode: 302 },
    ]);
    expect(redirect.httpsRoutes).toEqual([
      { backend: "default_db_80", match: { kind: "path", prefix: "/db" }, action: "route" },
    ]);
    const both = build({ "serviceloadbalancer/lb.sslTerm": "true", [A.sslRedirect]: "false" });
    expect(both.httpRoutes).toEqual([
      { backend: "default_db_80", match: { kind: "path", prefix: "/db" }, action: "route-and-https" },
    ]);
    expect(both.httpsRoutes).toEqual([
      { backend: "default_db_80", match: { kind: "path", prefix: "/db" }, action: "route" },
    ]);
  });
});
