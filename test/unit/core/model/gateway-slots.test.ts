import { describe, expect, it } from "vitest";
import { RenderContext } from "../../../../shared/app/render-context.js";
import { backendLayoutSchema, layoutDigest } from "../../../../shared/core/model/layout-record.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../../../support/gateway-fixtures.js";
import { decideTexts } from "../../../support/haproxy-config.js";

const OPTIONS = { statsSocket: "/tmp/servicelb-test.sock", spareBackends: 2 };
/** The free spares of a fresh record: --spare-backends of them, --min-server-slots each. */
const SPARES = [
  { name: "gw:spare:1", slots: 4 },
  { name: "gw:spare:2", slots: 4 },
];

/** A Gateway on :8081 whose route sends everything to Service `web` (port 80), served by `pods`. */
function world(pods: string[], extra: unknown[] = []) {
  return [
    gatewayClass(),
    gateway("gw", [{ name: "http", port: 8081 }]),
    httpRoute("r", { parentRefs: [{ name: "gw" }], rules: [{ backendRefs: [{ name: "web", port: 80 }] }] }),
    service("web", [{ port: 80, targetPort: 8080 }]),
    slice("web", [{ port: 8080 }], pods, { name: "web-slice" }),
    ...extra,
  ];
}

function renderer(ctx = new RenderContext(parseRenderOptions(OPTIONS))) {
  let revision = 100;
  return (items: unknown[]) => ctx.render(snapshotFromDocuments([list(items, String(++revision))]));
}

/** The server lines of the Gateway backend of `web`. */
const servers = (config: string) =>
  /^backend gw:default:web:80 .*\n {4}balance roundrobin\n((?: {4}server .*\n)*)/m
    .exec(config)![1]!
    .trimEnd()
    .split("\n")
    .map((l) => l.trim());

describe("Gateway backends in server slots", () => {
  it("start with a free slot beyond their endpoints, at least --min-server-slots, recorded in the layout", () => {
    const r = renderer()(world(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]));
    expect(r.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 5 }, ...SPARES]);
    expect(servers(r.config).filter((l) => l.endsWith(" disabled"))).toEqual(["server s3 127.0.0.1:1 disabled"]);
    const few = renderer()(world(["10.0.0.1"]));
    expect(few.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 4 }, ...SPARES]);
  });

  it("a pod added, replaced or removed keeps the slots, and the agent applies it without a reload", () => {
    const render = renderer();
    let live = render(world(["10.0.0.1", "10.0.0.2"])).config;
    const steps = [
      ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
      ["10.0.0.2", "10.0.0.3", "10.0.0.9"],
      ["10.0.0.9"],
      [],
      ["10.0.0.5"],
    ];
    for (const pods of steps) {
      const r = render(world(pods));
      expect(r.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 4 }, ...SPARES]);
      expect(servers(r.config)).toHaveLength(4);
      for (const pod of pods) expect(r.config).toContain(` ${pod}:8080\n`);
      expect(decideTexts({ text: live, known: true }, r.config)).toMatchObject({ kind: "runtime" });
      live = r.config;
    }
  });

  it("a backend its endpoints outgrow grows at runtime, its endpoints staying where they were hashed", () => {
    const render = renderer();
    const before = render(world(["10.0.0.1", "10.0.0.2"]));
    const grown = render(world(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]));
    expect(grown.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 6, hashSlots: 4 }, ...SPARES]);
    const decision = decideTexts({ text: before.config, known: true }, grown.config);
    expect(decision).toMatchObject({ kind: "runtime" });
    expect(decision.kind === "runtime" && decision.commands.some((c) => c.op === "add")).toBe(true);
    for (const line of servers(before.config).filter((l) => !l.endsWith(" disabled")))
      expect(servers(grown.config)).toContain(line);
  });

  it("the record survives its schema and digest, and a cold instance that reads it renders the same config", () => {
    const render = renderer();
    render(world(["10.0.0.1", "10.0.0.2"]));
    const warm = render(world(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]));
    const parsed = backendLayoutSchema.parse(JSON.parse(JSON.stringify(warm.layout)));
    expect(layoutDigest(parsed)).toBe(layoutDigest(warm.layout!));

    const cold = new RenderContext(parseRenderOptions(OPTIONS));
    cold.useLayout(parsed);
    const again = cold.render(
      snapshotFromDocuments([list(world(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]), "102")]),
    );
    expect(again.config).toBe(warm.config);
  });

  it("a layout without Gateway backends has no record of them", () => {
    const render = renderer();
    render(world(["10.0.0.1"]));
    const r = render([service("web", [{ port: 80, targetPort: 8080 }]), slice("web", [{ port: 8080 }], ["10.0.0.1"])]);
    expect(r.layout).not.toHaveProperty("gateway");
  });

  it("a route to a Service no backend serves takes the lowest free spare, without a reload; removed, the spare is free again", () => {
    const render = renderer();
    const api = [
      service("api", [{ port: 80, targetPort: 8080 }]),
      slice("api", [{ port: 8080 }], ["10.0.1.1"], { name: "api-slice" }),
    ];
    const toApi = httpRoute("to-api", {
      parentRefs: [{ name: "gw" }],
      hostnames: ["api.example"],
      rules: [{ backendRefs: [{ name: "api", port: 80 }] }],
    });
    const before = render(world(["10.0.0.1"], api));
    const taken = render(world(["10.0.0.1"], [...api, toApi]));
    expect(taken.layout!.gateway).toEqual([
      { name: "gw:default:web:80", slots: 4 },
      { name: "gw:spare:1", slots: 4, holds: "gw:default:api:80" },
      { name: "gw:spare:2", slots: 4 },
    ]);
    expect(taken.config).toMatch(
      /^backend gw:spare:1 from http_defaults\n {4}balance roundrobin\n(?: {4}server .*\n)* {4}server s\d 10\.0\.1\.1:8080\n/m,
    );
    expect(taken.config).toMatch(/^#\| \d+:\d+ gw:spare:1$/m);
    expect(taken.config).not.toContain("gw:default:api:80");
    expect(decideTexts({ text: before.config, known: true }, taken.config)).toMatchObject({ kind: "runtime" });
    // Pointed at another new Service: the next spare; the one api leaves is free from the next change on.
    const ops = [
      service("ops", [{ port: 80, targetPort: 8080 }]),
      slice("ops", [{ port: 8080 }], ["10.0.2.1"], { name: "ops-slice" }),
    ];
    const toOps = httpRoute("to-api", {
      parentRefs: [{ name: "gw" }],
      hostnames: ["api.example"],
      rules: [{ backendRefs: [{ name: "ops", port: 80 }] }],
    });
    const moved = render(world(["10.0.0.1"], [...api, ...ops, toOps]));
    expect(moved.layout!.gateway).toEqual([
      { name: "gw:default:web:80", slots: 4 },
      { name: "gw:spare:1", slots: 4 },
      { name: "gw:spare:2", slots: 4, holds: "gw:default:ops:80" },
    ]);
    expect(decideTexts({ text: taken.config, known: true }, moved.config)).toMatchObject({ kind: "runtime" });
    render(world(["10.0.0.1"], [...api, toApi]));
    const freed = render(world(["10.0.0.1"], api));
    expect(freed.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 4 }, ...SPARES]);
    expect(decideTexts({ text: taken.config, known: true }, freed.config)).toMatchObject({ kind: "runtime" });
  });

  it("with no spare left, a Service routes start to reach gets a backend of its own, which is a reload", () => {
    const render = renderer(new RenderContext(parseRenderOptions({ ...OPTIONS, spareBackends: 0 })));
    const api = [
      service("api", [{ port: 80, targetPort: 8080 }]),
      slice("api", [{ port: 8080 }], ["10.0.1.1"], { name: "api-slice" }),
    ];
    const toApi = httpRoute("to-api", {
      parentRefs: [{ name: "gw" }],
      hostnames: ["api.example"],
      rules: [{ backendRefs: [{ name: "api", port: 80 }] }],
    });
    const before = render(world(["10.0.0.1"], api));
    const after = render(world(["10.0.0.1"], [...api, toApi]));
    expect(after.layout!.gateway).toEqual([
      { name: "gw:default:api:80", slots: 4 },
      { name: "gw:default:web:80", slots: 4 },
    ]);
    expect(decideTexts({ text: before.config, known: true }, after.config)).toMatchObject({ kind: "reload" });
  });

  it("a backend of its own no route reaches stays, vacated, while the vacated hold no more slots than the reached", () => {
    const render = renderer(new RenderContext(parseRenderOptions({ ...OPTIONS, spareBackends: 0 })));
    const api = [
      service("api", [{ port: 80, targetPort: 8080 }]),
      slice("api", [{ port: 8080 }], ["10.0.1.1"], { name: "api-slice" }),
    ];
    const toApi = httpRoute("to-api", {
      parentRefs: [{ name: "gw" }],
      hostnames: ["api.example"],
      rules: [{ backendRefs: [{ name: "api", port: 80 }] }],
    });
    const both = render(world(["10.0.0.1"], [...api, toApi]));
    const left = render(world(["10.0.0.1"], api));
    expect(left.layout!.gateway).toEqual(both.layout!.gateway);
    expect(left.config).toMatch(
      /^backend gw:default:api:80 from http_defaults\n {4}balance roundrobin\n( {4}server s\d 127\.0\.0\.1:1 disabled\n){4}\n/m,
    );
    expect(decideTexts({ text: both.config, known: true }, left.config)).toMatchObject({ kind: "runtime" });
    expect(
      decideTexts({ text: left.config, known: true }, render(world(["10.0.0.1"], [...api, toApi])).config),
    ).toMatchObject({ kind: "runtime" });
    // A third Service's backend vacated as well: 8 slots left behind for 4 reached, and they go.
    const ops = [
      service("ops", [{ port: 80, targetPort: 8080 }]),
      slice("ops", [{ port: 8080 }], ["10.0.2.1"], { name: "ops-slice" }),
    ];
    const toOps = httpRoute("to-ops", {
      parentRefs: [{ name: "gw" }],
      hostnames: ["ops.example"],
      rules: [{ backendRefs: [{ name: "ops", port: 80 }] }],
    });
    render(world(["10.0.0.1"], [...api, ...ops, toApi, toOps]));
    const dropped = render(world(["10.0.0.1"], [...api, ...ops]));
    expect(dropped.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 4 }]);
  });
});
