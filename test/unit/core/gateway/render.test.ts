import { describe, expect, it } from "vitest";
import { configDescriptors } from "../../../../shared/core/model/descriptors.js";
import { frontendLines } from "../../../../shared/core/gateway/render.js";
import { resolveGateway } from "../../../../shared/core/gateway/resolve.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { list, service, slice } from "../../../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../../../support/gateway-fixtures.js";
import { decideTexts } from "../../../support/haproxy-config.js";
import { changeKind } from "../../../../shared/core/rollout/change-kind.js";
import { DRAW_RANGE, drawIds, WEIGHTS_MAP } from "../../../../shared/core/haproxy-config/gateway-weights.js";
import { gatewayMapPath } from "../../../../shared/core/haproxy-config/gateway-maps.js";

const options = parseRenderOptions({});
const cluster = [
  service("web", [{ port: 80, name: "http" }]),
  slice("web", [{ name: "http", port: 8080 }], ["10.0.0.1"]),
];
const render = (items: unknown[]) =>
  renderSnapshot(snapshotFromDocuments([list(items)]), options, new Renderer(loadTemplates()));

describe("rendering Gateway API routing", () => {
  it("leaves the config byte for byte as it was when no Gateway is servicelb's", () => {
    const foreign = [
      gatewayClass("other", "example.com/controller"),
      gateway("gw", [{ name: "http", port: 80 }], { className: "other" }),
      httpRoute("r", { parentRefs: [{ name: "gw" }], rules: [{ backendRefs: [{ name: "web", port: 80 }] }] }),
    ];
    const without = render(cluster);
    const withForeign = render([...cluster, ...foreign]);
    expect(withForeign.config).toBe(without.config);
    expect(withForeign.warnings).toEqual(without.warnings);
  });

  it("places routes on --http-port in the HTTP frontend, every http-request line before the first use_backend", () => {
    const { config } = render([
      ...cluster,
      gatewayClass(),
      gateway("gw", [{ name: "http", port: 80 }]),
      httpRoute("r", {
        parentRefs: [{ name: "gw" }],
        hostnames: ["a.example"],
        rules: [{ backendRefs: [{ name: "web", port: 80 }] }],
      }),
    ]);
    const frontend = config.slice(config.indexOf("frontend http "), config.indexOf("\nbackend "));
    const lines = frontend.split("\n");
    const firstUse = lines.findIndex((l) => l.trimStart().startsWith("use_backend"));
    const lastRequest = lines.map((l) => l.trimStart().startsWith("http-request")).lastIndexOf(true);
    expect(lastRequest).toBeLessThan(firstUse);
    expect(lines[firstUse]).toBe("    use_backend %[var(txn.gwbackend)] if { var(txn.gwbase) -m found }");
    const id = drawIds(["80/default/r#0"]).get("80/default/r#0")!;
    expect(config).toContain(`#> ${gatewayMapPath(80, "prefix")}\n#| a.example/ ${id * DRAW_RANGE}\n`);
    expect(config).not.toContain("frontend gw:");
  });

  it("binds an HTTPS listener's port with TLS and the certificates every node holds, from each node's --gateway-cert-dir", () => {
    const items = [
      ...cluster,
      gatewayClass(),
      gateway("gw", [
        {
          name: "https",
          port: 8443,
          protocol: "HTTPS",
          tls: { certificateRefs: [{ name: "site" }, { name: "other" }, { name: "missing" }] },
        },
      ]),
      httpRoute("r", {
        parentRefs: [{ name: "gw" }],
        hostnames: ["site.example.com"],
        rules: [{ backendRefs: [{ name: "web", port: 80 }] }],
      }),
    ];
    const held = ["default/site", "default/other"];
    const result = renderSnapshot(snapshotFromDocuments([list(items)]), options, new Renderer(loadTemplates()), {
      gatewayCertificates: { holders: [{ name: "node a", certificates: held }], unknown: "-" },
    });
    const frontend = result.config.slice(result.config.indexOf("frontend gw:8443"));
    expect(frontend.split("\n").slice(0, 3)).toEqual([
      "frontend gw:8443 from http_defaults",
      '    bind *:8443 ssl crt "${SERVICELB_GATEWAY_CERT_DIR}/default/site.pem" crt "${SERVICELB_GATEWAY_CERT_DIR}/default/other.pem" ssl-min-ver TLSv1.2',
      "    http-request set-var(txn.host) req.hdr(host),field(1,:),lower",
    ]);
    // The route's host and its path prefix: a line of the port's prefix map, as on an HTTP port.
    expect(result.config).toMatch(/^#> maps\/gw\.8443\.prefix\.map\n#\| site\.example\.com\/ \d+$/m);
    expect(result.warnings.map((w) => w.message)).toContain(
      "Gateway default/gw listener https: certificate default/missing (default/missing.pem): not held by node a (served with default/site, default/other)",
    );
    // Nothing held: the listener is not bound at all, rather than bound with a file a node lacks.
    const none = render(items);
    expect(none.config).not.toContain("frontend gw:8443");
    expect(none.config).not.toContain("SERVICELB_GATEWAY_CERT_DIR");
  });

  it("counts a descriptor for each Gateway port with a frontend of its own, as the config holds", () => {
    const result = render([
      ...cluster,
      gatewayClass(),
      gateway("gw", [
        { name: "a", port: 80 },
        { name: "b", port: 8081 },
        { name: "c", port: 8082 },
      ]),
      httpRoute("r", { parentRefs: [{ name: "gw" }], rules: [{ backendRefs: [{ name: "web", port: 80 }] }] }),
    ]);
    expect(result.config).toContain("frontend gw:8082 ");
    expect(result.stats.descriptors).toBe(configDescriptors(result.config).own);
    expect(result.stats.descriptors).toBe(render(cluster).stats.descriptors + 2);
  });

  it("reaches only the Services --namespace and --selector expose, as a live list would", () => {
    const items = [
      ...cluster,
      service("hidden", [{ port: 80, name: "http" }], { labels: { expose: "no" } }),
      gatewayClass(),
      gateway("gw", [{ name: "http", port: 8081 }]),
      httpRoute("r", {
        parentRefs: [{ name: "gw" }],
        rules: [{ backendRefs: [{ name: "web", port: 80 }] }, { backendRefs: [{ name: "hidden", port: 80 }] }],
      }),
    ];
    const selected = renderSnapshot(
      snapshotFromDocuments([list(items)]),
      parseRenderOptions({ selector: "expose!=no" }),
      new Renderer(loadTemplates()),
    );
    expect(selected.config).toContain("backend gw:default:web:80 ");
    expect(selected.config).not.toContain("gw:default:hidden:80");
    expect(selected.warnings.map((w) => w.message).join("\n")).toContain("BackendNotFound: backendRef hidden");
  });

  it("answers 500 for a rule without backends, and splits a rule's traffic by a draw over its weights", () => {
    const snap = snapshotFromDocuments([
      list([
        ...cluster,
        service("api", [{ port: 80, name: "http" }]),
        gatewayClass(),
        gateway("gw", [{ name: "http", port: 8081 }]),
        httpRoute("r", {
          parentRefs: [{ name: "gw" }],
          rules: [
            { matches: [{ path: { type: "Exact", value: "/none" } }] },
            {
              backendRefs: [
                { name: "web", port: 80, weight: 3 },
                { name: "gone", port: 80, weight: 1 },
                { name: "api", port: 80, weight: 0 },
              ],
            },
          ],
        }),
      ]),
    ]);
    const { requests, uses } = frontendLines(
      resolveGateway(snap, { httpPort: 80, reserved: new Map() })!.frontends[0]!,
    );
    expect(requests).toContain("http-request set-var(txn.gwpick) rand(4) if { var(txn.gw) -m int eq 1 }");
    expect(uses.split("\n")).toEqual([
      "    use_backend gw:500 if { var(txn.gw) -m int eq 0 }",
      "    use_backend gw:default:web:80 if { var(txn.gw) -m int eq 1 } { var(txn.gwpick) -m int lt 3 }",
      "    use_backend gw:500 if { var(txn.gw) -m int eq 1 }",
      "",
    ]);
  });

  it("draws in the weights map with the built-in templates, so a change of weights only changes map lines", () => {
    const split = (web: number, api: number) => [
      ...cluster,
      service("api", [{ port: 80, name: "http" }]),
      slice("api", [{ name: "http", port: 8080 }], ["10.0.0.2"]),
      gatewayClass(),
      gateway("gw", [{ name: "http", port: 8081 }]),
      httpRoute("r", {
        parentRefs: [{ name: "gw" }],
        rules: [
          {
            backendRefs: [
              { name: "web", port: 80, weight: web },
              { name: "api", port: 80, weight: api },
            ],
          },
        ],
      }),
    ];
    const base = drawIds(["8081/default/r#0"]).get("8081/default/r#0")! * DRAW_RANGE;
    const before = render(split(3, 1)).config;
    expect(before).toContain(
      `    http-request set-var(txn.gwbackend) rand(${DRAW_RANGE}),add(txn.gwbase),map_int(${WEIGHTS_MAP},gw:500) if { var(txn.gwbase) -m found }\n`,
    );
    expect(before).toContain("    use_backend %[var(txn.gwbackend)] if { var(txn.gwbase) -m found }\n");
    expect(before).toContain(`#> ${gatewayMapPath(8081, "prefix")}\n#| / ${base}\n`);
    const after = render(split(0, 1)).config;
    expect(after).toContain(`#> ${WEIGHTS_MAP}\n#| ${base}:${base + DRAW_RANGE - 1} gw:default:api:80\n`);
    expect(decideTexts({ text: before, known: true }, after)).toMatchObject({
      kind: "runtime",
      commands: [],
      files: [{ path: WEIGHTS_MAP, entries: [`${base}:${base + DRAW_RANGE - 1} gw:default:api:80`] }],
    });
    // Like a Service taken into a spare: applied on every node at once, outside a canary's waves.
    expect(changeKind(before, after)).toBe("endpoints");
  });

  it("applies a simple route added, pointed at another backend and removed through map lines, the lookups' lines unchanged", () => {
    const two = [
      ...cluster,
      service("api", [{ port: 80, name: "http" }]),
      slice("api", [{ name: "http", port: 8080 }], ["10.0.0.2"]),
      gatewayClass(),
      gateway("gw", [{ name: "http", port: 8081 }]),
      httpRoute("web", {
        parentRefs: [{ name: "gw" }],
        hostnames: ["web.example"],
        rules: [{ backendRefs: [{ name: "web", port: 80 }] }],
      }),
      httpRoute("api", {
        parentRefs: [{ name: "gw" }],
        rules: [
          { matches: [{ path: { type: "PathPrefix", value: "/api" } }], backendRefs: [{ name: "api", port: 80 }] },
        ],
      }),
    ];
    const added = (to: string) =>
      httpRoute("extra", {
        parentRefs: [{ name: "gw" }],
        hostnames: ["extra.example"],
        rules: [{ matches: [{ path: { type: "Exact", value: "/x" } }], backendRefs: [{ name: to, port: 80 }] }],
      });
    const steps = [two, [...two, added("web")], [...two, added("api")], two].map((items) => render(items).config);
    for (let i = 1; i < steps.length; i++) {
      const decision = decideTexts({ text: steps[i - 1]!, known: true }, steps[i]!);
      expect(decision.kind).toBe("runtime");
      expect(changeKind(steps[i - 1]!, steps[i]!)).toBe("endpoints");
    }
    const base = drawIds(["8081/default/extra#0"]).get("8081/default/extra#0")! * DRAW_RANGE;
    expect(steps[1]).toContain(`#> ${gatewayMapPath(8081, "exact")}\n#| extra.example/x ${base}\n`);
    expect(steps[2]).toContain(`#| ${base}:${base + DRAW_RANGE - 1} gw:default:api:80\n`);
  });

  it("keeps lines for a rule with filters, and a reload for its change", () => {
    const withFilter = (value: string) => [
      ...cluster,
      gatewayClass(),
      gateway("gw", [{ name: "http", port: 8081 }]),
      httpRoute("r", {
        parentRefs: [{ name: "gw" }],
        rules: [
          {
            filters: [{ type: "RequestHeaderModifier", requestHeaderModifier: { set: [{ name: "x-a", value }] } }],
            backendRefs: [{ name: "web", port: 80 }],
          },
        ],
      }),
    ];
    const before = render(withFilter("1")).config;
    expect(before).toContain(
      "    http-request set-var(txn.gw) int(0) if !{ var(txn.gw) -m found } !{ var(txn.gwbase) -m found }\n",
    );
    expect(before).toContain("    use_backend gw:default:web:80 if { var(txn.gw) -m int eq 0 }\n");
    expect(decideTexts({ text: before, known: true }, render(withFilter("2")).config).kind).toBe("reload");
  });

  it("quotes every value a route author chose", () => {
    const snap = snapshotFromDocuments([
      list([
        ...cluster,
        gatewayClass(),
        gateway("gw", [{ name: "http", port: 8081 }]),
        httpRoute("r", {
          parentRefs: [{ name: "gw" }],
          rules: [
            {
              matches: [
                { path: { type: "Exact", value: "/a'b$c" }, headers: [{ name: "x-h", value: 'v" #${HOME} %[src]' }] },
              ],
              filters: [
                {
                  type: "RequestHeaderModifier",
                  requestHeaderModifier: { set: [{ name: "x-s", value: "100% ${X}" }] },
                },
              ],
              backendRefs: [{ name: "web", port: 80 }],
            },
          ],
        }),
      ]),
    ]);
    const routing = resolveGateway(snap, { httpPort: 80, reserved: new Map() })!;
    const { requests } = frontendLines(routing.frontends[0]!);
    expect(requests).toContain(`{ path -m str "/a\\'b\\$c" }`);
    expect(requests).toContain(`acl gw_0_h0 req.fhdr(x-h,-1) -m str "v\\" \\#\\\${HOME} %[src]"`);
    expect(requests).toContain(`http-request set-header x-s "100%% \\\${X}" if`);
  });

  it("refuses a header value with a control character instead of writing it", () => {
    const snap = snapshotFromDocuments([
      list([
        ...cluster,
        gatewayClass(),
        gateway("gw", [{ name: "http", port: 8081 }]),
        httpRoute("r", {
          parentRefs: [{ name: "gw" }],
          rules: [
            {
              filters: [
                {
                  type: "RequestHeaderModifier",
                  requestHeaderModifier: { set: [{ name: "x-s", value: "a\r\nInjected: 1" }] },
                },
              ],
              backendRefs: [{ name: "web", port: 80 }],
            },
          ],
        }),
      ]),
    ]);
    const routing = resolveGateway(snap, { httpPort: 80, reserved: new Map() })!;
    expect(routing.frontends).toEqual([]);
    expect(routing.status.httpRoutes[0]!.parents[0]!.conditions[0]).toMatchObject({
      status: "False",
      reason: "UnsupportedValue",
    });
  });
});

describe("Gateway API objects in a snapshot", () => {
  it("are absent from a snapshot that holds none", () => {
    expect("gateway" in snapshotFromDocuments([list(cluster)])).toBe(false);
  });

  it("are read from typed lists, with a malformed object reported and the rest kept", () => {
    const snap = snapshotFromDocuments([
      {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "GatewayClassList",
        metadata: { resourceVersion: "7" },
        items: [gatewayClass()],
      },
      {
        apiVersion: "gateway.networking.k8s.io/v1",
        kind: "HTTPRouteList",
        metadata: {},
        items: [
          httpRoute("good", { parentRefs: [{ name: "gw" }] }),
          httpRoute("bad", { parentRefs: [{ name: "gw" }], hostnames: ["UPPER..case"] }),
        ],
      },
    ]);
    expect(snap.gateway?.gatewayClasses.map((c) => c.metadata.name)).toEqual(["servicelb"]);
    expect(snap.gateway?.httpRoutes.map((r) => r.metadata.name)).toEqual(["good"]);
    expect(snap.problems).toHaveLength(1);
    expect(snap.problems[0]).toContain("HTTPRoute default/bad");
    expect(snap.revision).toBe("7");
    // The API's defaults: one rule matching every path, a PathPrefix of /
    expect(snap.gateway?.httpRoutes[0]?.spec.rules).toEqual([
      {
        matches: [{ path: { type: "PathPrefix", value: "/" }, headers: [], queryParams: [], method: null }],
        filters: [],
        backendRefs: [],
      },
    ]);
  });
});
