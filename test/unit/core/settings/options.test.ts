import { describe, expect, it } from "vitest";
import { optionSpecs, parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { envName, flagName, settingsFromEnv } from "../../../../shared/core/settings/settings.js";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";

describe("render options", () => {
  it("has the original's defaults", () => {
    const o = parseRenderOptions({});
    expect(o).toMatchObject({
      httpPort: 80,
      httpsPort: 443,
      statsPort: 1936,
      balanceAlgorithm: "roundrobin",
      defaultReturnCode: 404,
      checkInterval: "2s",
      tcpServices: [],
    });
  });

  it("accepts strings as flags and environment give them", () => {
    const o = parseRenderOptions({
      httpPort: "8080",
      forwardServices: "true",
      tcpServices: "mysql:3306, shop/redis:6379",
      selector: "app=web,!canary",
    });
    expect(o.httpPort).toBe(8080);
    expect(o.forwardServices).toBe(true);
    expect(o.tcpServices).toEqual([
      { ref: "mysql", port: 3306 },
      { ref: "shop/redis", port: 6379 },
    ]);
    expect(o.selector).toEqual([
      { op: "eq", key: "app", value: "web" },
      { op: "absent", key: "canary" },
    ]);
  });

  it.each([
    [{ balanceAlgorithm: "roundrobin\n  option x" }, "--balance-algorithm"],
    [{ httpPort: "0" }, "--http-port"],
    [{ tcpServices: "mysql" }, "--tcp-services"],
    [{ tcpServices: "a/b/c:1" }, "--tcp-services"],
    [{ sslCaCert: "/ca.pem" }, "--ssl-ca-cert needs --ssl-cert"],
    [{ sslCert: "/a b.pem" }, "--ssl-cert"],
    [{ sslCert: "crt-list:" }, "--ssl-cert: a PEM file, a directory, or crt-list:<file>"],
    [{ sslCert: "crt-list::x" }, "--ssl-cert: a PEM file, a directory, or crt-list:<file>"],
    [{ sslCert: "crt-list:/a b.list" }, "--ssl-cert"],
    [{ statsPort: 80 }, "must differ"],
    [{ checkInterval: "5" }, "--check-interval"],
    [{ selector: "app in (a,b)" }, "--selector"],
    [{ unknownThing: 1 }, "unknownThing"],
    [{ hostClaims: "shop: [a b]" }, "--host-claims"],
    [{ hostClaims: { "Shop!": ["a.example.com"] } }, "--host-claims"],
    [{ hostClaims: "[shop.example.com]" }, "--host-claims: a map of namespace to host patterns"],
    [{ ownHosts: "lb.example.com,bad host" }, '--own-hosts: "bad host" is not a host name'],
    [{ timeoutServer: "30" }, "--timeout-server: a time between 1ms and 24h"],
    [{ acceptProxy: "10.0.0.0/8 if TRUE" }, "--accept-proxy"],
    [{ timeoutClient: "25h" }, "--timeout-client"],
    [{ timeoutQueue: "1s\n    server x 1.2.3.4:80" }, "--timeout-queue"],
  ])("rejects %j naming the option", (input, needle) => {
    expect(() => parseRenderOptions(input)).toThrow(needle);
  });

  it("takes --ssl-cert as a PEM file or directory (crt), or as crt-list:<file>", () => {
    const bind = (sslCert: string) =>
      new Renderer(loadTemplates())
        .render(buildModel(snapshotFromDocuments([]), parseRenderOptions({ sslCert })))
        .split("\n")
        .find((l) => l.includes(" ssl "))
        ?.trim();
    expect(bind("/etc/haproxy/certs")).toBe("bind *:443 ssl crt /etc/haproxy/certs");
    expect(bind("crt-list:/etc/haproxy/certs.list")).toBe("bind *:443 ssl crt-list /etc/haproxy/certs.list");
  });

  it("reads --host-claims as a map from the config file, or as YAML/JSON text from a flag or variable", () => {
    const expected = {
      shop: [
        { name: "shop.example.com", wildcard: false },
        { name: "shop.example.com", wildcard: true },
      ],
      "team-a": [],
    };
    expect(
      parseRenderOptions({ hostClaims: { shop: ["Shop.example.com", "*.shop.example.com"], "team-a": [] } }).hostClaims,
    ).toEqual(expected);
    expect(
      parseRenderOptions({ hostClaims: '{shop: [shop.example.com, "*.shop.example.com"], team-a: []}' }).hostClaims,
    ).toEqual(expected);
    expect(
      parseRenderOptions({ hostClaims: '{"shop": ["shop.example.com", "*.shop.example.com"], "team-a": []}' })
        .hostClaims,
    ).toEqual(expected);
    expect(parseRenderOptions({}).hostClaims).toBeUndefined();
  });

  it("takes global allow and deny lists up to 10,000 entries, as per Service; --accept-proxy, on one config line, 60", () => {
    const ranges = (n: number) => Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`).join(",");
    expect(parseRenderOptions({ allowSourceRange: ranges(100) }).allowSourceRange).toHaveLength(100);
    expect(parseRenderOptions({ denySourceRange: ranges(10_000) }).denySourceRange).toHaveLength(10_000);
    expect(() => parseRenderOptions({ allowSourceRange: ranges(10_001) })).toThrow(/10001 entries; at most 10000/);
    expect(() => parseRenderOptions({ acceptProxy: ranges(61) })).toThrow(
      /61 entries; at most 60 fit on one HAProxy line/,
    );
  });

  it("reads --own-hosts as a comma list of host patterns", () => {
    expect(parseRenderOptions({ ownHosts: "LB.example.com, *.nodes.example.com," }).ownHosts).toEqual([
      { name: "lb.example.com", wildcard: false },
      { name: "nodes.example.com", wildcard: true },
    ]);
    expect(parseRenderOptions({}).ownHosts).toBeUndefined();
  });

  it("has the timeouts the defaults sections always had, normalised when given", () => {
    expect(parseRenderOptions({})).toMatchObject({
      timeoutServer: "50s",
      timeoutConnect: "5s",
      timeoutClient: "50s",
      timeoutTunnel: "1h",
    });
    expect(parseRenderOptions({}).timeoutQueue).toBeUndefined();
    expect(parseRenderOptions({ timeoutServer: "090s", timeoutQueue: "2s" })).toMatchObject({
      timeoutServer: "90s",
      timeoutQueue: "2s",
    });
  });

  it("maps every option to one flag and one environment variable", () => {
    expect(flagName("sslCaCert")).toBe("ssl-ca-cert");
    expect(envName("sslCaCert")).toBe("SERVICELB_SSL_CA_CERT");
    expect(settingsFromEnv({ SERVICELB_HTTP_PORT: "81", OTHER: "x" }, Object.keys(optionSpecs))).toEqual({
      httpPort: "81",
    });
  });
});
