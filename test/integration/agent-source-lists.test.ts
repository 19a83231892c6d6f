import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { runtimeCommand } from "../../shared/adapters/haproxy/runtime.js";
import { SETTING_ANNOTATIONS } from "../../shared/core/model/backend-settings.js";
import { A, agentWorld, count } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { waitFor } from "../support/net.js";

// Allow lists live in pattern files beside haproxy.cfg; a change confined to them goes live
// through HAProxy's runtime API (prepare, add, commit: atomic), with no reload, and a HAProxy
// restarted from disk enforces the changed list. Real HAProxy, real s3rver; clients connect
// from 127.0.0.1 or 127.0.0.5 (loopback is 127.0.0.0/8).

const world = agentWorld();
const { node, start, appliedKey } = world;

/** The Service `web` (pod A), reachable only from `allow`. */
const allowed = (allow: string) => [
  service("web", [{ port: 80, targetPort: world.pods.port }], {
    annotations: { [SETTING_ANNOTATIONS.allowSourceRange]: allow },
  }),
  slice("web", [{ port: world.pods.port }], [A]),
];

/** GET through the node's HAProxy from the client address `from`; one connection per request. */
function getFrom(port: number, from: string, path = "/web/x"): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, localAddress: from, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error(`GET ${path} timed out`)));
    req.end();
  });
}

/** `n` CIDRs that hold no loopback client: padding that makes a list long. */
const padding = (n: number, second: number) =>
  Array.from({ length: n }, (_, i) => `10.${second}.${i >> 8}.${i & 255}/32`);

describe("allow lists changed without a reload", () => {
  it("a client allowed, the list changed, the client refused (403): 0 reloads, same master; a restarted HAProxy reads the files", async () => {
    const n = await node();
    const http = n.lb.options.httpPort;
    await n.publish(allowed("127.0.0.1"), 100);
    const agent = await start(n);
    expect(await getFrom(http, "127.0.0.1")).toBe(200);
    expect(await getFrom(http, "127.0.0.5")).toBe(403);
    const before = await showProc(n.masterSocket);

    const changed = await n.publish(allowed("127.0.0.5, fd00::/8"), 110);
    await n.notify(agent, changed);
    await appliedKey(agent, changed.key);
    expect(agent.status().applied).toMatchObject({ key: changed.key, how: "runtime" });
    expect(await getFrom(http, "127.0.0.1")).toBe(403);
    expect(await getFrom(http, "127.0.0.5")).toBe(200);
    const after = await showProc(n.masterSocket);
    expect(after.master.pid).toBe(before.master.pid);
    expect(after.master.reloads).toBe(before.master.reloads);
    expect(await count(agent.metrics.reloads)).toBe(0);
    expect(await count(agent.metrics.runtimePatternSwaps)).toBe(1);
    // The files match what runs: the list beside the config, the config as published.
    const listFile = join(n.configPath, "..", "patterns", "default.web.allow");
    expect(readFileSync(listFile, "utf8")).toBe("127.0.0.5\nfd00::/8\n");
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(changed.key)).config);

    // HAProxy dies; the agent restarts it on the files, which hold the changed list.
    process.kill(before.master.pid, "SIGKILL");
    await waitFor("a new master", async () => {
      const p = await showProc(n.masterSocket).catch(() => undefined);
      return p && p.master.pid !== before.master.pid ? p : undefined;
    });
    await waitFor("served again", async () =>
      (await getFrom(http, "127.0.0.5").catch(() => 0)) === 200 ? 1 : undefined,
    );
    expect(await getFrom(http, "127.0.0.1")).toBe(403);
  });

  it("a long list swapped while a client keeps asking: never refused by a half-updated list, 0 reloads", async () => {
    const n = await node();
    const http = n.lb.options.httpPort;
    // The client's own entry is last in both lists, so a list cleared and refilled in place
    // would refuse it for most of the swap.
    await n.publish(allowed([...padding(3000, 1), "127.0.0.1"].join(",")), 100);
    const agent = await start(n);
    expect(await getFrom(http, "127.0.0.1")).toBe(200);
    const reloadsBefore = (await showProc(n.masterSocket)).master.reloads;

    const statuses: number[] = [];
    let asking = true;
    const client = (async () => {
      while (asking) statuses.push(await getFrom(http, "127.0.0.1"));
    })();
    const changed = await n.publish(allowed([...padding(3000, 2), "127.0.0.1"].join(",")), 110);
    await n.notify(agent, changed);
    await appliedKey(agent, changed.key);
    // A few more requests after the commit.
    const seen = statuses.length;
    await waitFor("requests after the swap", async () => (statuses.length > seen + 5 ? 1 : undefined));
    asking = false;
    await client;
    expect(agent.status().applied).toMatchObject({ key: changed.key, how: "runtime" });
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect((await showProc(n.masterSocket)).master.reloads).toBe(reloadsBefore);
    // The new list is the one HAProxy matches against.
    const socket = n.lb.options.statsSocket;
    expect(await runtimeCommand(socket, "get acl patterns/default.web.allow 10.2.0.7")).toMatch(/match=yes/);
    expect(await runtimeCommand(socket, "get acl patterns/default.web.allow 10.1.0.7")).toMatch(/match=no/);
  });

  it("a typo in a list never lets a client in: an allow list narrows without a reload, a deny list closes the Service", async () => {
    const n = await node();
    const http = n.lb.options.httpPort;
    await n.publish(allowed("127.0.0.1,127.0.0.5"), 100);
    const agent = await start(n);
    expect(await getFrom(http, "127.0.0.1")).toBe(200);
    expect(await getFrom(http, "127.0.0.5")).toBe(200);
    const reloadsBefore = (await showProc(n.masterSocket)).master.reloads;
    const applied = async (items: Parameters<typeof n.publish>[0], revision: number) => {
      const c = await n.publish(items, revision);
      await n.notify(agent, c);
      await appliedKey(agent, c.key);
      return agent.status().applied;
    };

    // One entry mistyped: the others still apply, through the runtime API.
    expect(await applied(allowed("127.0.0.5,127.0.0.1/33"), 110)).toMatchObject({ how: "runtime" });
    expect(await getFrom(http, "127.0.0.1")).toBe(403);
    expect(await getFrom(http, "127.0.0.5")).toBe(200);
    // Every entry mistyped: the list is empty, and empty allows no one.
    expect(await applied(allowed("127.0.0.5/33"), 120)).toMatchObject({ how: "runtime" });
    expect(await getFrom(http, "127.0.0.1")).toBe(403);
    expect(await getFrom(http, "127.0.0.5")).toBe(403);
    expect((await showProc(n.masterSocket)).master.reloads).toBe(reloadsBefore);

    const denied = (deny: string) => [
      service("web", [{ port: 80, targetPort: world.pods.port }], {
        annotations: { [SETTING_ANNOTATIONS.denySourceRange]: deny },
      }),
      slice("web", [{ port: world.pods.port }], [A]),
    ];
    await applied(denied("127.0.0.5"), 130);
    expect(await getFrom(http, "127.0.0.1")).toBe(200);
    expect(await getFrom(http, "127.0.0.5")).toBe(403);
    await applied(denied("127.0.0.5,bogus"), 140);
    expect(await getFrom(http, "127.0.0.1")).toBe(403);
    expect(await getFrom(http, "127.0.0.5")).toBe(403);
    await applied(denied("127.0.0.5"), 150);
    expect(await getFrom(http, "127.0.0.1")).toBe(200);
  });
});
