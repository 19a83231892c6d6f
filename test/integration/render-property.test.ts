import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_BACKEND_SETTINGS, SETTING_ANNOTATIONS } from "../../shared/core/model/backend-settings.js";
import { buildModel } from "../../shared/core/model/build-model.js";
import type { Model } from "../../shared/core/model/model.js";
import { parseRenderOptions } from "../../shared/core/settings/options.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { PATTERN_PATHS, splitConfig } from "../../shared/core/haproxy-config/pattern-files.js";
import { placeBackends } from "../../shared/core/model/backend-layout.js";
import { ROUTE_LOOKUP, routeMapLines } from "../../shared/core/haproxy-config/route-maps.js";
import { SERVICE_MAP, SERVICE_MAP_REFERENCE, serviceMapLine } from "../../shared/core/haproxy-config/service-map.js";
import { routeRedirect } from "../../shared/core/render/model-views.js";
import { Renderer } from "../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { list, service, slice } from "../support/fixtures.js";
import { haproxyCheck, loopbackOptions, requireHaproxy, type LoopbackSetup } from "../support/haproxy.js";
import { makePki } from "../support/tls.js";

const templates = loadTemplates();
const renderer = new Renderer(templates);

/**
 * Every line of a template as a pattern: literal text kept, outputs as wildcards, text inside
 * `{% if %}…{% endif %}` on the same line optional. Lines that are nothing but tags (where
 * pre-rendered fragments are placed) produce no pattern, so each line of those fragments must
 * match a fragment line itself.
 */
function linePattern(line: string): RegExp | null {
  const parts = line.split(/(\{\{.*?\}\}|\{%.*?%\})/);
  if (
    parts
      .filter((_, i) => i % 2 === 0)
      .join("")
      .trim() === ""
  )
    return null;
  let open = 0;
  let re = "";
  parts.forEach((p, i) => {
    if (i % 2 === 0) re += p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    else if (p.startsWith("{{")) re += ".*";
    else if (/^\{%-?\s*(if|unless)\b/.test(p)) {
      re += "(?:";
      open++;
    } else if (/^\{%-?\s*(else|elsif)\b/.test(p) && open > 0) re += "|";
    else if (/^\{%-?\s*end(if|unless)\b/.test(p) && open > 0) {
      re += ")?";
      open--;
    }
  });
  return new RegExp(`^${re}${")?".repeat(open)}$`);
}
const patterns = [...Object.values(templates), SERVICE_MAP_REFERENCE, ROUTE_LOOKUP].flatMap((source) =>
  source.split("\n").flatMap((l: string) => linePattern(l) ?? []),
);

/**
 * Server lines have the shape of any `server <name> <address>`, so the line check alone cannot
 * tell an injected one from ours: each backend must also hold exactly the slots the model gave
 * it, s1…sN in order, and no other section any server.
 */
function strayServers(config: string, model: Model): string[] {
  const slots = new Map(model.backends.map((b) => [b.name, b.servers.length]));
  const stray: string[] = [];
  let section = "";
  let next = 1;
  for (const line of config.split("\n")) {
    if (/^\S/.test(line)) {
      const held = next - 1;
      if (slots.has(section) && held !== slots.get(section))
        stray.push(`backend ${section}: ${held} of ${slots.get(section)} slots`);
      section = /^backend (\S+)/.exec(line)?.[1] ?? line;
      next = 1;
    } else if (/^\s*server\s/.test(line)) {
      if (!slots.has(section) || !line.startsWith(`    server s${next} `)) stray.push(`${section}: ${line}`);
      next++;
    }
  }
  return stray;
}

const hostile = fc.oneof(
  fc.constantFrom(
    "evil.com\n    server x 1.2.3.4:80",
    "a b",
    "#comment",
    '"quoted"',
    "back\\slash",
    "' single",
    "-i /x",
    "/ok/path",
    "*.wild.example",
    "valid.example.com",
    "if TRUE",
    "or host_acl",
    "{ path_beg / }",
    "${HOME}",
    "/a\r\nuse_backend x",
    "日本.example",
    "x".repeat(5000),
    "roundrobin",
    "leastconn",
    "true",
    "True",
    "\u0000",
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 20 }),
);

/** A valid list longer than one config line could hold: it must reach a pattern file whole. */
const LONG_LIST = Array.from({ length: 200 }, (_, i) => `10.${i}.0.0/16`).join(", ");

/** Values of the per-Service settings, valid and nearly valid, so accepted settings reach haproxy -c too. */
const settingValue = fc.constantFrom(
  // Source lists that try to reach a pattern file, its path or a runtime command.
  "10.0.0.1;clear acl patterns/default.web.allow",
  "10.0.0.0/8\n#> patterns/evil.x.allow",
  "10.0.0.0/8,#| 1.2.3.4",
  "10.0.0.0/8,,",
  "FD00::1, 10.0.0.1/32",
  `${LONG_LIST}, 300.0.0.1`,
  LONG_LIST,
  "500ms",
  "30s",
  "24h",
  "25h",
  "30",
  "1s\n    server x 1.2.3.4:80",
  "/healthz",
  "/ready?full=1 204",
  "/h 200\n    http-request deny",
  "10.0.0.0/8, fd00::/8",
  "127.0.0.1",
  "10.0.0.0/8 if TRUE",
  "fe80::1%eth0",
  "5",
  "429",
  "503",
  "418",
  "h2",
  "h1-ssl",
  "h2-ssl",
  "grpc",
  "v1",
  "v2",
  "false",
  "308",
);

const A = SETTING_ANNOTATIONS;
/** Settings that pass their grammars, so that most runs carry some of them to haproxy -c. */
const validSetting = fc.constantFrom<[string, string]>(
  [A.timeoutServer, "500ms"],
  [A.timeoutConnect, "2s"],
  [A.timeoutClient, "1h"],
  [A.timeoutTunnel, "2h"],
  [A.timeoutQueue, "1s"],
  [A.checkHttp, "/healthz 200"],
  [A.allowSourceRange, "10.0.0.0/8, fd00::/8"],
  [A.denySourceRange, "127.0.0.1"],
  [A.allowSourceRange, LONG_LIST],
  [A.denySourceRange, "FD00::/8, 192.0.2.1"],
  [A.rateLimitRps, "5"],
  [A.rateLimitStatus, "503"],
  [A.maxconn, "10"],
  [A.backendProtocol, "h2"],
  [A.backendProtocol, "h1-ssl"],
  [A.backendProtocol, "h2-ssl"],
  [A.proxyProtocol, "v1"],
  [A.proxyProtocol, "v2"],
  [A.sslRedirect, "false"],
  [A.sslRedirectCode, "308"],
);

const annotationKeys = [
  ...["lb.host", "lb.aclMatch", "lb.algorithm", "lb.sslTerm", "lb.cookie-sticky-session"].map(
    (k) => `serviceloadbalancer/${k}`,
  ),
  ...Object.values(SETTING_ANNOTATIONS),
];

const serviceArb = fc.record({
  // A few fixed names, so that two objects of one name (which no cluster holds) come up too.
  name: fc.oneof(fc.constantFrom("web", "api"), fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/)),
  namespace: fc.constantFrom("default", "shop", "kube-system", "team-a"),
  // Repeated port numbers, unnamed ports of multi-port Services and unknown protocols: shapes the
  // API server refuses, which the validator must refuse too.
  ports: fc.array(
    fc.record({
      port: fc.constantFrom(80, 443, 8080, 3306, 9000),
      name: fc.constantFrom(undefined, "a", "b", "http"),
      protocol: fc.constantFrom("TCP", "TCP", "TCP", "UDP", "SCTP", "tcp"),
    }),
    { minLength: 1, maxLength: 3 },
  ),
  affinity: fc.constantFrom("None", "ClientIP"),
  created: fc.constantFrom(undefined, "2024-01-01T00:00:00Z", "2025-06-01T12:00:00Z"),
  annotations: fc
    .tuple(
      fc.dictionary(
        fc.constantFrom(...annotationKeys),
        fc.oneof(hostile, settingValue, fc.constantFrom("/shop", "/shop/web", "/web/x", "/team-a", "api.example.com")),
        { maxKeys: 8 },
      ),
      fc.array(validSetting, { maxLength: 5 }),
    )
    .map(([hostileOnes, valid]) => ({ ...Object.fromEntries(valid), ...hostileOnes })),
  addressType: fc.constantFrom("IPv4", "IPv4", "IPv6", "FQDN"),
  ips: fc.array(
    fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.constantFrom("fd00::1", "fd00::2:3", "fe80::1%eth0", "::ffff:10.0.0.1", "10.0.0.01", "web.example.com", ""),
    ),
    { minLength: 0, maxLength: 6 },
  ),
});

describe("hostile input never breaks the config", () => {
  let setup: LoopbackSetup;
  let cert: string;
  beforeAll(async () => {
    requireHaproxy();
    setup = await loopbackOptions();
    cert = makePki(setup.dir).serverPem;
  });
  afterAll(() => setup?.cleanup());

  it("the line check catches directives that no template line produces", () => {
    for (const injected of ["    http-request deny", "use_backend x if TRUE", "    stats auth admin:admin"]) {
      expect(patterns.some((p) => p.test(injected))).toBe(false);
    }
  });

  it("the server check catches server lines the model did not ask for", () => {
    const model = buildModel(
      snapshotFromDocuments([list([service("web", [{ port: 80 }]), slice("web", [{ port: 80 }], ["10.0.0.1"])])]),
      parseRenderOptions({}),
    );
    const config = renderer.render(model);
    expect(strayServers(config, model)).toEqual([]);
    const s1 = /^ {4}server s\d+ 10\.0\.0\.1:80\n/m.exec(config)![0];
    expect(strayServers(config.replace(s1, `${s1}    server x 1.2.3.4:80\n`), model)).not.toEqual([]);
    expect(strayServers(config.replace(s1, `${s1}${s1}`), model)).not.toEqual([]);
    expect(
      strayServers(
        config.replace("backend default_page from http_defaults\n", `backend default_page from http_defaults\n${s1}`),
        model,
      ),
    ).not.toEqual([]);
    expect(strayServers(config.replace(s1, ""), model)).not.toEqual([]);
  });

  it("random clusters with hostile annotations and objects no API server would hold: whatever the validator accepts renders a config HAProxy accepts, with only template lines", () => {
    // Settings that passed their grammars, across all runs: the generators must reach haproxy -c with some.
    let accepted = 0;
    fc.assert(
      fc.property(fc.array(serviceArb, { maxLength: 6 }), fc.boolean(), fc.boolean(), (services, tcp, ssl) => {
        const items = services.flatMap((s) => [
          service(s.name, s.ports, {
            namespace: s.namespace,
            sessionAffinity: s.affinity,
            annotations: s.annotations,
            created: s.created,
          }),
          slice(
            s.name,
            s.ports.map((p) => ({ name: p.name, port: p.port + 1, protocol: p.protocol })),
            s.ips,
            { namespace: s.namespace, addressType: s.addressType },
          ),
        ]);
        const options = parseRenderOptions({
          ...setup.options,
          selector: undefined,
          tcpServices:
            tcp && services[0] ? `${services[0].namespace}/${services[0].name}:${services[0].ports[0]!.port}` : "",
          sslCert: ssl ? cert : undefined,
          httpsPort: setup.options.httpPort + 1,
          acceptProxy: tcp ? "10.0.0.0/8, fd00::/8" : undefined,
        });
        const snapshot = snapshotFromDocuments([list(items)]);
        const { config } = renderSnapshot(snapshot, options, renderer);
        // The pattern section the agent writes out is checked on its own: exactly the model's lists.
        const split = splitConfig(config);
        if ("error" in split) throw new Error(split.error);
        const stray = split.head
          .replace(PATTERN_PATHS, "")
          .split("\n")
          .filter((line) => line !== "" && !patterns.some((p) => p.test(line)));
        expect(stray).toEqual([]);
        // The model as rendered: spares in, held Services moved (a fresh layout holds none).
        const model = placeBackends(buildModel(snapshot, options)).model;
        const lists = new Map<string, readonly string[]>();
        for (const b of model.backends) {
          const id = `patterns/${b.namespace}.${b.service}`;
          if (b.settings.allowSources) lists.set(`${id}.allow`, b.settings.allowSources);
          if (b.settings.denySources) lists.set(`${id}.deny`, b.settings.denySources);
        }
        const files = [...split.files].filter(([path]) => path.startsWith("patterns/"));
        expect(new Map(files.sort())).toEqual(new Map([...lists].sort()));
        const maps = [...split.files].filter(([path]) => path.startsWith("maps/") && path !== SERVICE_MAP);
        expect(new Map(maps)).toEqual(routeMapLines(model.httpRoutes, routeRedirect));
        // The Service of each backend that serves one, a line each, in the backends' order.
        const served = model.backends.flatMap((b) => serviceMapLine(b) ?? []);
        expect(split.files.get(SERVICE_MAP) ?? []).toEqual(served);
        expect(strayServers(config, model)).toEqual([]);
        for (const b of model.backends)
          if (JSON.stringify(b.settings) !== JSON.stringify(DEFAULT_BACKEND_SETTINGS)) accepted++;
        const check = haproxyCheck(config, setup.dir);
        expect(check.output).toBe("");
        expect(check.ok).toBe(true);
      }),
      { numRuns: 60 },
    );
    expect(accepted).toBeGreaterThan(5);
  });
});
