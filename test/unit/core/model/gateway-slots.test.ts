import { describe, expect, it } from "vitest";
import { RenderContext } from "../../../../shared/app/render-context.js";
import { backendLayoutSchema, layoutDigest } from "../../../../shared/core/model/layout-record.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../../../support/gateway-fixtures.js";
import { decideTexts } from "../../../support/haproxy-config.js";

const OPTIONS = { statsSocket: "/tmp/servicelb-test.sock", spareBackends: 2 };

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
    expect(r.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 5 }]);
    expect(servers(r.config).filter((l) => l.endsWith(" disabled"))).toEqual(["server s3 127.0.0.1:1 disabled"]);
    const few = renderer()(world(["10.0.0.1"]));
    expect(few.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 4 }]);
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
      expect(r.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 4 }]);
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
    expect(grown.layout!.gateway).toEqual([{ name: "gw:default:web:80", slots: 6, hashSlots: 4 }]);
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
});
