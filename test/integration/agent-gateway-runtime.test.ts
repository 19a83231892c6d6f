/*
 * Gateway API backends through the agent's runtime path: a pod of a Service an HTTPRoute reaches
 * added, moved or removed, a change of the route's backend weights, and a simple route added,
 * pointed at other Services (one no route reached before, taken into a spare backend) and
 * removed, are applied through HAProxy's runtime API with no reload, as a Service's own endpoint changes are. Real HAProxy, real s3rver, a warm render
 * context as a warm function instance has.
 */
import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import type { Agent } from "../../shared/agent/agent.js";
import { A, agentWorld, B, C, count, httpGet, type Node } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../support/gateway-fixtures.js";

const world = agentWorld();
const { node, start, appliedKey } = world;

/** A Service `name` on port 80 whose pods are `pods`, exposed by no annotation: only the route reaches it. */
function svc(name: string, pods: string[]): unknown[] {
  return [
    service(name, [{ port: 80, targetPort: world.pods.port }]),
    slice(name, [{ port: world.pods.port }], pods, { name: `${name}-slice` }),
  ];
}

/** A Gateway listening on the node's HTTP port, and a route for `gw.example` that splits by `weights`. */
function gatewayWith(n: Node, weights: Record<string, number>): unknown[] {
  return [
    gatewayClass(),
    gateway("gw", [{ name: "http", port: n.lb.options.httpPort, hostname: "gw.example" }]),
    httpRoute("split", {
      parentRefs: [{ name: "gw" }],
      rules: [{ backendRefs: Object.entries(weights).map(([name, weight]) => ({ name, port: 80, weight })) }],
    }),
  ];
}

async function apply(n: Node, agent: Agent, items: unknown[], revision: number) {
  const published = await n.publish(items, revision);
  await n.notify(agent, published);
  await appliedKey(agent, published.key);
  return agent.status().applied;
}

/** The same HAProxy master as `master`, which has not reloaded, and an agent that counted no reload. */
async function expectNoReload(n: Node, agent: Agent, master: { pid: number; reloads: number }) {
  const after = (await showProc(n.masterSocket)).master;
  expect(after.pid).toBe(master.pid);
  expect(after.reloads).toBe(master.reloads);
  expect(await count(agent.metrics.reloads)).toBe(0);
}

/** Which pods answer `gw.example` over `times` requests. */
async function answering(n: Node, times = 12): Promise<string[]> {
  const seen = new Set<string>();
  for (let i = 0; i < times; i++) {
    const r = await n.getHost("gw.example", "/x");
    seen.add(r.status === 200 ? r.body.split(" ")[0]! : String(r.status));
  }
  return [...seen].sort();
}

describe("Gateway API backends through the runtime API", () => {
  it("a backend's pods added, moved and removed are applied with 0 reloads, and traffic follows them", async () => {
    const n = await node();
    const gw = gatewayWith(n, { web: 1 });
    await n.publish([...gw, ...svc("web", [A])], 100);
    const agent = await start(n);
    expect(await answering(n)).toEqual(["A"]);
    const master = (await showProc(n.masterSocket)).master;

    // A second pod comes up.
    expect(await apply(n, agent, [...gw, ...svc("web", [A, B])], 110)).toMatchObject({ how: "runtime" });
    expect(await answering(n)).toEqual(["A", "B"]);
    // A pod replaced in place: A goes, C comes.
    expect(await apply(n, agent, [...gw, ...svc("web", [B, C])], 120)).toMatchObject({ how: "runtime" });
    expect(await answering(n)).toEqual(["B", "C"]);
    // Scaled down to one pod.
    expect(await apply(n, agent, [...gw, ...svc("web", [C])], 130)).toMatchObject({ how: "runtime" });
    expect(await answering(n)).toEqual(["C"]);
    // No pod at all: 503, still no reload; and back.
    expect(await apply(n, agent, [...gw, ...svc("web", [])], 140)).toMatchObject({ how: "runtime" });
    expect(await answering(n, 3)).toEqual(["503"]);
    expect(await apply(n, agent, [...gw, ...svc("web", [A])], 150)).toMatchObject({ how: "runtime" });
    expect(await answering(n)).toEqual(["A"]);

    await expectNoReload(n, agent, master);
  });

  it("a change of backend weights is applied with 0 reloads, and traffic follows the weights", async () => {
    const n = await node();
    const services = [...svc("one", [A]), ...svc("two", [B])];
    await n.publish([...gatewayWith(n, { one: 1, two: 0 }), ...services], 100);
    const agent = await start(n);
    expect(await answering(n)).toEqual(["A"]);
    const master = (await showProc(n.masterSocket)).master;

    expect(await apply(n, agent, [...gatewayWith(n, { one: 0, two: 1 }), ...services], 110)).toMatchObject({
      how: "runtime",
    });
    expect(await answering(n)).toEqual(["B"]);
    expect(await apply(n, agent, [...gatewayWith(n, { one: 1, two: 1 }), ...services], 120)).toMatchObject({
      how: "runtime",
    });
    expect(await answering(n, 40)).toEqual(["A", "B"]);
    // Every weight 0: the rule's traffic is answered 500 (the spec's "no backend with a weight").
    expect(await apply(n, agent, [...gatewayWith(n, { one: 0, two: 0 }), ...services], 130)).toMatchObject({
      how: "runtime",
    });
    expect(await answering(n, 3)).toEqual(["500"]);

    await expectNoReload(n, agent, master);
  });

  it("a simple route added, pointed at other Services (one taken into a spare backend) and removed is applied with 0 reloads, and traffic follows it", async () => {
    const n = await node({ spareBackends: 2 });
    const services = [...svc("one", [A]), ...svc("two", [B]), ...svc("three", [C])];
    const route = (name: string, path: string, to: string) =>
      httpRoute(name, {
        parentRefs: [{ name: "gw" }],
        rules: [{ matches: [{ path: { type: "PathPrefix", value: path } }], backendRefs: [{ name: to, port: 80 }] }],
      });
    const base = [
      gatewayClass(),
      gateway("gw", [{ name: "http", port: n.lb.options.httpPort, hostname: "gw.example" }]),
      route("all", "/", "one"),
      ...services,
    ];
    const withOther = [...base, route("other", "/other", "two")];
    /** Who answers `path` on gw.example. */
    const at = async (path: string) => {
      const r = await n.getHost("gw.example", path);
      return r.status === 200 ? r.body.split(" ")[0]! : String(r.status);
    };
    await n.publish(withOther, 100);
    const agent = await start(n);
    expect([await at("/x"), await at("/other")]).toEqual(["A", "B"]);
    const master = (await showProc(n.masterSocket)).master;

    // A route added, its match in a map, its Service's backend there already.
    expect(await apply(n, agent, [...withOther, route("extra", "/x", "one")], 110)).toMatchObject({ how: "runtime" });
    expect(await at("/x/y")).toBe("A");
    // Pointed at the other Service: its weights map line.
    expect(await apply(n, agent, [...withOther, route("extra", "/x", "two")], 120)).toMatchObject({ how: "runtime" });
    expect([await at("/x/y"), await at("/xy")]).toEqual(["B", "A"]);
    // Pointed at a Service no route reached: it goes into a spare backend.
    expect(await apply(n, agent, [...withOther, route("extra", "/x", "three")], 125)).toMatchObject({
      how: "runtime",
    });
    expect(await at("/x/y")).toBe("C");
    // Removed: the shorter prefix answers again, and the spare is free. Asked all along, the path
    // is answered by the route or by the one after it, never 500 (a match whose range is gone).
    const during = async (path: string, change: () => Promise<unknown>) => {
      const seen = new Set<string>();
      let done = false;
      const asking = (async () => {
        while (!done) seen.add(await at(path));
      })();
      await change().finally(() => (done = true));
      await asking;
      return [...seen].sort();
    };
    const removal = await during("/x/y", async () =>
      expect(await apply(n, agent, withOther, 130)).toMatchObject({ how: "runtime" }),
    );
    expect(removal.filter((who) => who !== "A" && who !== "C")).toEqual([]);
    expect(await at("/x/y")).toBe("A");
    // The only route to `two` removed: its backend stays, vacated; and a route back to it takes it again.
    const lastRoute = await during("/other", async () =>
      expect(await apply(n, agent, base, 140)).toMatchObject({ how: "runtime" }),
    );
    expect(lastRoute.filter((who) => who !== "A" && who !== "B")).toEqual([]);
    expect(await at("/other")).toBe("A");
    expect(await apply(n, agent, withOther, 150)).toMatchObject({ how: "runtime" });
    expect(await at("/other")).toBe("B");

    await expectNoReload(n, agent, master);
  });

  it("a route on a header the frontend already matches on, added, pointed elsewhere and removed, is applied with 0 reloads", async () => {
    const n = await node({ spareBackends: 2 });
    const services = [...svc("one", [A]), ...svc("two", [B]), ...svc("three", [C])];
    const onHeader = (name: string, value: string, to: string) =>
      httpRoute(name, {
        parentRefs: [{ name: "gw" }],
        rules: [
          {
            matches: [{ path: { type: "PathPrefix", value: "/h" }, headers: [{ name: "Version", value }] }],
            backendRefs: [{ name: to, port: 80 }],
          },
        ],
      });
    const base = [
      gatewayClass(),
      gateway("gw", [{ name: "http", port: n.lb.options.httpPort, hostname: "gw.example" }]),
      httpRoute("all", {
        parentRefs: [{ name: "gw" }],
        rules: [{ matches: [{ path: { type: "PathPrefix", value: "/" } }], backendRefs: [{ name: "one", port: 80 }] }],
      }),
      onHeader("first", "one", "two"),
      ...services,
    ];
    /** Who answers /h/x on gw.example with `version` (none: no header). */
    const at = async (version?: string) => {
      const r = await httpGet(n.lb.options.httpPort, "/h/x", false, {
        host: "gw.example",
        ...(version ? { version } : {}),
      });
      return r.status === 200 ? r.body.split(" ")[0]! : String(r.status);
    };
    await n.publish(base, 100);
    const agent = await start(n);
    expect([await at(), await at("one"), await at("two")]).toEqual(["A", "B", "A"]);
    const master = (await showProc(n.masterSocket)).master;

    // Another value of the header, to another Service: a header map line.
    expect(await apply(n, agent, [...base, onHeader("second", "two", "three")], 110)).toMatchObject({
      how: "runtime",
    });
    expect([await at(), await at("one"), await at("two")]).toEqual(["A", "B", "C"]);
    // Pointed at the first Service, then removed.
    expect(await apply(n, agent, [...base, onHeader("second", "two", "one")], 120)).toMatchObject({
      how: "runtime",
    });
    expect(await at("two")).toBe("A");
    expect(await apply(n, agent, base, 130)).toMatchObject({ how: "runtime" });
    expect([await at("one"), await at("two")]).toEqual(["B", "A"]);
    // A value outside the keys' grammar is never looked up: the route after it answers.
    expect(await at("one|gw.example/h/")).toBe("A");

    await expectNoReload(n, agent, master);
  });

  it("a route under a wildcard hostname, added and removed, is applied with 0 reloads, and the longest wildcard answers", async () => {
    const n = await node({ spareBackends: 2 });
    const services = [...svc("one", [A]), ...svc("two", [B]), ...svc("three", [C])];
    const under = (name: string, hostname: string, path: string, to: string) =>
      httpRoute(name, {
        parentRefs: [{ name: "gw" }],
        hostnames: [hostname],
        rules: [{ matches: [{ path: { type: "PathPrefix", value: path } }], backendRefs: [{ name: to, port: 80 }] }],
      });
    const base = [
      gatewayClass(),
      gateway("gw", [{ name: "http", port: n.lb.options.httpPort }]),
      under("wide", "*.example", "/", "one"),
      under("narrow", "*.shop.example", "/", "two"),
      ...services,
    ];
    const at = async (host: string, path = "/x") => {
      const r = await n.getHost(host, path);
      return r.status === 200 ? r.body.split(" ")[0]! : String(r.status);
    };
    await n.publish(base, 100);
    const agent = await start(n);
    // The longest wildcard first; a wildcard never matches its own name, which the shorter one takes.
    expect([await at("a.shop.example"), await at("b.a.shop.example"), await at("shop.example")]).toEqual([
      "B",
      "B",
      "A",
    ]);
    expect([await at("example"), await at("a.other")]).toEqual(["404", "404"]);
    const master = (await showProc(n.masterSocket)).master;

    expect(await apply(n, agent, [...base, under("cart", "*.shop.example", "/cart", "three")], 110)).toMatchObject({
      how: "runtime",
    });
    expect([
      await at("a.shop.example", "/cart/1"),
      await at("a.shop.example", "/x"),
      await at("b.example", "/cart"),
    ]).toEqual(["C", "B", "A"]);
    expect(await apply(n, agent, base, 120)).toMatchObject({ how: "runtime" });
    expect(await at("a.shop.example", "/cart/1")).toBe("B");

    await expectNoReload(n, agent, master);
  });
});
