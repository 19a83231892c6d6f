import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { SETTING_ANNOTATIONS } from "../../shared/core/model/backend-settings.js";
import { A, agentWorld, B, C, count, type Node } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import type { Agent } from "../../shared/agent/agent.js";

// A Service added or removed is served through HAProxy's runtime API: its routes are map lines
// and its endpoints go into a spare backend's slots, so the agent applies it with no reload and
// the master keeps its reload count. A reload comes only when a spare cannot take the Service (a
// per-Service setting, none left), and that reload provisions fresh spares. Real HAProxy, real
// s3rver, a warm render context as a warm function instance has.

const world = agentWorld();
const { node, start, appliedKey } = world;

/** Service `name` in `namespace` on port 80, served by `pods`. */
function svc(
  name: string,
  pods: string[],
  opts: { namespace?: string; annotations?: Record<string, string> } = {},
): unknown[] {
  const { namespace = "default", annotations } = opts;
  return [
    service(name, [{ port: 80, targetPort: world.pods.port }], { namespace, annotations }),
    slice(name, [{ port: world.pods.port }], pods, { namespace }),
  ];
}

async function apply(n: Node, agent: Agent, items: unknown[], revision: number) {
  const published = await n.publish(items, revision);
  await n.notify(agent, published);
  await appliedKey(agent, published.key);
  return agent.status().applied;
}

describe("Services added and removed through spare backends", () => {
  it("a Service added is routed by its own path and host with 0 reloads; removed, it answers 404 with 0 reloads", async () => {
    const n = await node({ spareBackends: 16 });
    const web = svc("web", [A]);
    await n.publish(web, 100);
    const agent = await start(n);
    expect(await n.get("/web/x")).toEqual({ status: 200, body: "A /x" });
    const master = (await showProc(n.masterSocket)).master;

    const api = svc("api", [B]);
    expect(await apply(n, agent, [...web, ...api], 110)).toMatchObject({ how: "runtime" });
    // The prefix is stripped by the spare, as a Service's own backend strips it.
    expect(await n.get("/api/v1/items?q=1")).toEqual({ status: 200, body: "B /v1/items?q=1" });
    expect(await n.get("/api")).toEqual({ status: 200, body: "B /" });
    expect((await n.get("/apix")).status).toBe(404);
    expect(await n.get("/web/x")).toEqual({ status: 200, body: "A /x" });

    // Another namespace's own path has two segments; a host route passes the path unchanged.
    const cart = svc("cart", [C], {
      namespace: "shop",
      annotations: { "serviceloadbalancer/lb.host": "cart.example.com" },
    });
    expect(await apply(n, agent, [...web, ...api, ...cart], 120)).toMatchObject({ how: "runtime" });
    expect(await n.get("/shop/cart/basket")).toEqual({ status: 200, body: "C /basket" });
    expect(await n.getHost("cart.example.com", "/shop/cart/basket")).toEqual({
      status: 200,
      body: "C /shop/cart/basket",
    });

    expect(await apply(n, agent, [...web, ...cart], 130)).toMatchObject({ how: "runtime" });
    expect((await n.get("/api/v1")).status).toBe(404);
    expect(await n.get("/shop/cart/basket")).toEqual({ status: 200, body: "C /basket" });

    // A Service with a backend of its own removed: the backend stays, empty, unrouted.
    expect(await apply(n, agent, [...cart], 140)).toMatchObject({ how: "runtime" });
    expect((await n.get("/web/x")).status).toBe(404);
    expect(await n.getHost("cart.example.com", "/")).toEqual({ status: 200, body: "C /" });

    const after = (await showProc(n.masterSocket)).master;
    expect(after.pid).toBe(master.pid);
    expect(after.reloads).toBe(master.reloads);
    expect(await count(agent.metrics.reloads)).toBe(0);
  });

  it("a Service a spare cannot serve, or one more than the spares, is a reload that provisions fresh spares", async () => {
    const n = await node({ spareBackends: 1 });
    const web = svc("web", [A]);
    await n.publish(web, 100);
    const agent = await start(n);
    const a = svc("a", [B]);
    expect(await apply(n, agent, [...web, ...a], 110)).toMatchObject({ how: "runtime" });

    // No spare left: a reload, after which `a` has a backend of its own and `b` a fresh spare...
    const b = svc("b", [C]);
    expect(await apply(n, agent, [...web, ...a, ...b], 120)).toMatchObject({ how: "reload" });
    expect(n.lastConfig()).toContain("backend default_a_80 ");
    expect(await n.get("/a/x")).toEqual({ status: 200, body: "B /x" });
    expect(await n.get("/b/x")).toEqual({ status: 200, body: "C /x" });

    // ...so the next one is runtime again.
    const c = svc("c", [A]);
    expect(await apply(n, agent, [...web, ...a, ...b, ...c], 130)).toMatchObject({ how: "runtime" });
    expect(await n.get("/c/y")).toEqual({ status: 200, body: "A /y" });

    // A per-Service setting needs a backend of its own.
    const slow = svc("slow", [B], { annotations: { [SETTING_ANNOTATIONS.timeoutServer]: "90s" } });
    expect(await apply(n, agent, [...web, ...a, ...b, ...c, ...slow], 140)).toMatchObject({ how: "reload" });
    expect(await n.get("/slow/z")).toEqual({ status: 200, body: "B /z" });
    expect(await n.get("/c/y")).toEqual({ status: 200, body: "A /y" });
  });
});
