import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { DEFAULT_BACKEND_SETTINGS } from "../../../../shared/core/model/backend-settings.js";
import { compareStrings } from "../../../../shared/core/compare.js";
import { configParser, parseConfig } from "../../../../shared/core/haproxy-config/parse.js";
import { patternFilePath, renderPatternSection } from "../../../../shared/core/haproxy-config/pattern-files.js";
import { routeMapLines } from "../../../../shared/core/haproxy-config/route-maps.js";
import { FREE_SLOT_ADDRESS, type ServerLine } from "../../../../shared/core/haproxy-config/server-line.js";
import { SERVICE_MAP, serviceMapLine } from "../../../../shared/core/haproxy-config/service-map.js";
import type { Backend, HttpRoute, Model, TcpFrontend } from "../../../../shared/core/model/model.js";
import { ALGORITHMS, parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { routeRedirect } from "../../../../shared/core/render/model-views.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { slotCookies, slotName } from "../../../../shared/core/model/slots.js";

const HEAD = `global
    master-worker
    stats socket /run/haproxy/admin.sock mode 600 level admin
    server-state-file /var/lib/haproxy/server-state

defaults http_defaults
    mode http

listen stats from http_defaults
    server s1 10.9.9.9:1

backend web from http_defaults
    server s1 10.0.0.1:8080 check inter 2s
    server s2 127.0.0.1:1 disabled
    # a comment in a backend is no server line
backend empty from http_defaults
    balance roundrobin
backend v6
    server s1 [fd00::7]:8080 cookie 0a0b0c0d
`;
const withList = (entries: string[]) => HEAD + renderPatternSection([{ path: "patterns/default.web.allow", entries }]);

describe("parseConfig", () => {
  it("reads the file section, the global settings and every backend's server lines", () => {
    const text = withList(["10.0.0.0/8", "fd00::/8"]);
    const config = parseConfig(text);
    if ("error" in config) throw new Error(config.error);
    expect(config.text).toBe(text);
    expect(config.head).toBe(HEAD);
    expect([...config.files]).toEqual([["patterns/default.web.allow", ["10.0.0.0/8", "fd00::/8"]]]);
    expect(config.statsSocket).toBe("/run/haproxy/admin.sock");
    expect(config.serverStateFile).toBe("/var/lib/haproxy/server-state");
    // A listen section's servers are not slots the agent changes.
    expect([...config.backends]).toEqual([
      [
        "web",
        [
          { server: "s1", address: "10.0.0.1", port: 8080, enabled: true, params: " check inter 2s" },
          { server: "s2", address: "127.0.0.1", port: 1, enabled: false, params: "" },
        ],
      ],
      ["empty", []],
      ["v6", [{ server: "s1", address: "fd00::7", port: 8080, enabled: true, params: " cookie 0a0b0c0d" }]],
    ]);
  });

  it("finds no stats socket or server-state file outside a global section", () => {
    const config = parseConfig("defaults d\n    stats socket /x\n    server-state-file /y\n");
    expect(config).toMatchObject({ statsSocket: undefined, serverStateFile: undefined });
  });

  it("keeps the text of a config whose file section is not one, with why", () => {
    const bad = withList(["192.0.2.1"]).replace("192.0.2.1", "not-an-address");
    expect(parseConfig(bad)).toEqual({
      text: bad,
      error: expect.stringMatching(/not-an-address.*is not an address or CIDR/),
    });
  });
});

describe("configParser", () => {
  it("parses each text once while it is one of the newest two, and as parseConfig does", () => {
    const parse = configParser({});
    const [a, b, c] = [withList(["10.0.0.1"]), withList(["10.0.0.2"]), withList(["10.0.0.3"])];
    const first = parse(a);
    expect(first).toEqual(parseConfig(a));
    // An equal text built anew is the same config: the same value.
    expect(parse(a.split("").join(""))).toBe(first);
    expect(parse(b)).toEqual(parseConfig(b));
    expect(parse(a)).toBe(first);
    parse(c);
    parse(b);
    // Three texts since: `a` is parsed again, to an equal value.
    const again = parse(a);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });

  it("takes the files of the config parsed before when the new one's file section is the same", () => {
    const parse = configParser({});
    const running = withList(["10.0.0.0/8"]);
    const moved = running.replace("10.0.0.1:8080", "10.0.0.9:8080");
    const listed = running.replace("10.0.0.0/8", "10.0.0.0/9");
    const [a, b, c] = [parse(running), parse(moved), parse(listed)];
    if ("error" in a || "error" in b || "error" in c) throw new Error("the configs parse");
    expect(b).toEqual(parseConfig(moved));
    expect(b.files).toBe(a.files);
    // Another line in the section: read and checked anew.
    expect(c).toEqual(parseConfig(listed));
    expect(c.files).not.toBe(b.files);
    expect(parse(running.replace("10.0.0.0/8", "10.0.0.0/88"))).toHaveProperty("error");
  });

  it("keeps an error as parseConfig reports it", () => {
    const parse = configParser({});
    const bad = withList(["192.0.2.1"]).replace("192.0.2.1", "not-an-address");
    expect(parse(bad)).toEqual(parseConfig(bad));
  });
});

// The round trip: any model the built-in templates render parses back to the model's own backends,
// slots, addresses, maps and pattern files. The renderer and the agent share the grammar
// (server-line.ts, pattern-files.ts, route-maps.ts, service-map.ts); this holds them to it.

const renderer = new Renderer(loadTemplates());
const options = parseRenderOptions({});

const label = fc.stringMatching(/^[a-z]([a-z0-9-]{0,8}[a-z0-9])?$/);
const port = fc.integer({ min: 1, max: 65535 });
const endpoint = fc.oneof(
  fc.tuple(fc.ipV4(), port).map(([ip, p]) => `${ip}:${p}`),
  fc.tuple(fc.ipV6(), port).map(([ip, p]) => `[${ip}]:${p}`),
);
const sources = fc.option(fc.uniqueArray(fc.ipV4(), { minLength: 1, maxLength: 5 }), { nil: null });

const backendArb = fc.record({
  namespace: label,
  service: label,
  servicePort: port,
  mode: fc.constantFrom<Backend["mode"]>("http", "http", "tcp"),
  algorithm: fc.constantFrom(...ALGORITHMS),
  affinity: fc.constantFrom<Backend["affinity"]["kind"]>("none", "source", "cookie"),
  servers: fc.array(fc.option(endpoint, { nil: null }), { maxLength: 6 }),
  allowSources: sources,
  denySources: sources,
  check: fc.boolean(),
  maxconn: fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: null }),
  routes: fc.subarray(["host", "wildcard", "path"] as const),
  /** A spare (backend-layout.ts): free (it carries no Service port) or stripping its route's segments. */
  spare: fc.constantFrom<undefined | "free" | 1 | 2>(undefined, "free", 1, 2),
});

const modelArb = fc
  .uniqueArray(backendArb, { maxLength: 8, selector: (b) => `${b.namespace}/${b.service}` })
  .map((drawn): Model => {
    const backends: Backend[] = [];
    const httpRoutes: HttpRoute[] = [];
    const tcpFrontends: TcpFrontend[] = [];
    for (const [i, d] of drawn.entries()) {
      const name = `${d.namespace}_${d.service}_${d.servicePort}`;
      backends.push({
        name,
        namespace: d.namespace,
        service: d.service,
        servicePort: d.servicePort,
        mode: d.mode,
        algorithm: d.algorithm,
        affinity:
          d.affinity === "source" ? { kind: "source", timeoutSeconds: 60 } : { kind: d.affinity as "none" | "cookie" },
        servers: d.servers,
        cookies: d.affinity === "cookie" ? slotCookies(d.servers) : null,
        strip: null,
        settings: {
          ...DEFAULT_BACKEND_SETTINGS,
          allowSources: d.allowSources,
          denySources: d.denySources,
          check: d.check,
          maxconn: d.maxconn,
        },
        ...(d.spare === "free" ? { carries: null } : {}),
        ...(typeof d.spare === "number" ? { stripByRoute: true } : {}),
      });
      if (d.mode === "tcp") {
        tcpFrontends.push({ name: `tcp_${20_000 + i}`, port: 20_000 + i, backend: name, timeoutClient: null });
        continue;
      }
      const host = `${d.service}.${d.namespace}.example`;
      for (const kind of d.routes) {
        const match: HttpRoute["match"] =
          kind === "path"
            ? { kind: "path", prefix: `/${d.namespace}/${d.service}` }
            : { kind: "host", host: { name: host, wildcard: kind === "wildcard" } };
        const strip = typeof d.spare === "number" ? { stripSegments: d.spare } : {};
        httpRoutes.push({ backend: name, match, action: "route", ...strip });
      }
    }
    backends.sort((a, b) => compareStrings(a.name, b.name));
    return {
      revision: "1",
      options,
      httpRoutes,
      httpsRoutes: [],
      tcpFrontends,
      backends,
      defaultPage: { status: 404, body: "not found" },
      warnings: [],
      skipped: [],
      readyServers: backends.reduce((n, b) => n + b.servers.filter((s) => s !== null).length, 0),
    };
  });

/** A slot's server line as the model asks for it. */
function expectedSlot(b: Backend, i: number): ServerLine {
  const address = b.servers[i] ?? FREE_SLOT_ADDRESS;
  const colon = address.lastIndexOf(":");
  const cookie = b.cookies?.[i] ?? null;
  return {
    server: slotName(i),
    address: address.slice(0, colon).replace(/^\[(.*)\]$/, "$1"),
    port: Number(address.slice(colon + 1)),
    enabled: b.servers[i] !== null,
    params: cookie === null ? "" : ` cookie ${cookie}`,
  };
}

/** The file section the model asks for: the Service map, the route maps, a pattern file per list, by path. */
function expectedFiles(model: Model): Array<[string, string[]]> {
  const files = new Map<string, string[]>();
  files.set(SERVICE_MAP, model.backends.flatMap((b) => serviceMapLine(b) ?? []).sort(compareStrings));
  for (const [path, lines] of routeMapLines(model.httpRoutes, routeRedirect)) files.set(path, lines);
  for (const b of model.backends) {
    if (b.settings.allowSources) files.set(patternFilePath(b.namespace, b.service, "allow"), b.settings.allowSources);
    if (b.settings.denySources) files.set(patternFilePath(b.namespace, b.service, "deny"), b.settings.denySources);
  }
  return [...files].sort(([a], [b]) => compareStrings(a, b));
}

describe("a config rendered by the built-in templates", () => {
  it("parses back to the model's backends, slots, addresses, maps and pattern files (property)", () => {
    fc.assert(
      fc.property(modelArb, (model) => {
        const config = parseConfig(renderer.render(model));
        if ("error" in config) throw new Error(config.error);
        expect([...config.backends.keys()]).toEqual(["default_page", ...model.backends.map((b) => b.name)]);
        for (const b of model.backends)
          expect(config.backends.get(b.name)).toEqual(b.servers.map((_, i) => expectedSlot(b, i)));
        expect([...config.files]).toEqual(expectedFiles(model));
        expect(config.statsSocket).toBe(options.statsSocket);
        expect(config.serverStateFile).toBe(options.serverStateFile);
      }),
      { numRuns: 300 },
    );
  });
});
