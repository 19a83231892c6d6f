import { spawn } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { roomForFleet } from "../../shared/app/agent-reports.js";
import type { Agent } from "../../shared/agent/agent.js";
import { RenderContext } from "../../shared/app/render-context.js";
import {
  configDescriptors,
  descriptorsNeeded,
  haproxyReserve,
  haproxyThreads,
} from "../../shared/core/model/descriptors.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { A, agentWorld, B, C, count, type Node } from "../support/agent.js";
import { list, service, slice, wideService } from "../support/fixtures.js";
import { loopbackOptions, writePatternFiles } from "../support/haproxy.js";
import { freePort, waitFor } from "../support/net.js";
import { makePki } from "../support/tls.js";

// A node whose HAProxy may open few file descriptors, as a container's `ulimit -n` makes it: the
// agent's --haproxy-bin is a wrapper that lowers the limit with prlimit before it runs HAProxy.
// HAProxy reserves a descriptor for every health-checked server slot; past its limit it refuses
// to reload, although `haproxy -c` passes. Real HAProxy, real s3rver.

const world = agentWorld();
const { node, start } = world;
const cpus = availableParallelism();

/** An executable that runs HAProxy with at most `limit` open files, as --haproxy-bin. */
function limitedHaproxy(dir: string, limit: number): string {
  const file = join(dir, `haproxy-nofile-${limit}`);
  writeFileSync(file, `#!/bin/sh\nexec prlimit --nofile=${limit}:${limit} haproxy "$@"\n`);
  chmodSync(file, 0o755);
  return file;
}

/** Service `name` on port 80, served by `pods`. */
function svc(name: string, pods: string[]): unknown[] {
  return [service(name, [{ port: 80, targetPort: world.pods.port }]), slice(name, [{ port: world.pods.port }], pods)];
}

const needOf = (config: string) => descriptorsNeeded(configDescriptors(config), cpus);

/** Publishes and pings; resolves once the agent has applied it or recorded an error about it. */
async function offer(n: Node, agent: Agent, items: unknown[], revision: number) {
  const published = await n.publish(items, revision);
  await n.notify(agent, published);
  return waitFor(`the agent's verdict on ${published.key}`, async () => {
    const s = agent.status();
    if (s.applied?.key === published.key) return { published, applied: s.applied, error: null };
    if (s.lastError?.key === published.key) return { published, applied: s.applied, error: s.lastError };
    return undefined;
  });
}

/** HAProxy as the agent starts it, under `limit`: its own words on the descriptors it wants, or "serves". */
function startUnder(limit: number, dir: string, config: string): Promise<string> {
  const file = join(dir, "haproxy.cfg");
  writePatternFiles(config, dir);
  writeFileSync(file, config);
  return new Promise((resolve) => {
    const child = spawn(
      "prlimit",
      [`--nofile=${limit}:${limit}`, "haproxy", "-W", "-S", join(dir, "master.sock"), "-f", file],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    const seen = (chunk: Buffer) => {
      out += chunk.toString();
      const raise = /Cannot raise FD limit to (\d+)/.exec(out);
      if (raise) resolve(raise[0]);
      else if (/Loading success/.test(out)) {
        resolve("serves");
        child.kill("SIGTERM");
      }
    };
    child.stdout.on("data", seen);
    child.stderr.on("data", seen);
    child.once("exit", () => resolve(out));
  });
}

describe("the file descriptors a config needs", () => {
  it("are what HAProxy itself asks for, in master-worker mode with the master CLI, with HTTPS and TCP frontends", async () => {
    const n = await node();
    const pki = makePki(n.dir);
    const items = [
      ...svc("web", [A, B]),
      ...wideService("multi", [81, 82, 83], [C]),
      service("db", [{ port: 15432 }]),
      slice("db", [{ port: 15432 }], [C]),
    ];
    const tls = { sslCert: pki.serverPem, httpsPort: await freePort(), tcpServices: "db:15432" };
    for (const extra of [{}, tls]) {
      const lb = await loopbackOptions({ spareBackends: 4, activeChecks: "true", ...extra });
      world.cleanups.push(() => lb.cleanup());
      const config = new RenderContext(lb.options).render(snapshotFromDocuments([list(items, "5")])).config;
      const need = needOf(config);
      expect(await startUnder(need - 1, lb.dir, config)).toBe(`Cannot raise FD limit to ${need}`);
      expect(await startUnder(need, lb.dir, config)).toBe("serves");
    }
  });
});

describe("a node short of file descriptors", () => {
  it("refuses a config over its limit before any reload, serves on, and takes the next config once the culprit is gone", async () => {
    const n = await node({ spareBackends: 16, activeChecks: "true" });
    const tenants = [...svc("web", [A]), ...svc("api", [B])];
    await n.publish(tenants, 100);
    // Room for the tenants and some, not for a Service of 64 ports more (256 slots).
    const limit = needOf(n.lastConfig()) + 100;
    const agent = await start(n, { haproxyBin: limitedHaproxy(n.dir, limit) });
    expect(await n.get("/web/x")).toEqual({ status: 200, body: "A /x" });
    // HAProxy's own limit, as the wrapper set it: the agent reads it off the running master.
    expect(agent.status().openFiles).toEqual({ limit, reserved: haproxyReserve(haproxyThreads(cpus)) });
    const reloads = await n.reloads();

    // One tenant's Service of 5,000 ports: 64 of them are served, still too many for this node.
    const wide = wideService(
      "wide",
      Array.from({ length: 5000 }, (_, i) => 1001 + i),
      [C],
    );
    const refused = await offer(n, agent, [...tenants, ...wide], 110);
    expect(needOf(n.lastConfig())).toBeGreaterThan(limit);
    expect(refused.error).toMatchObject({
      stage: "check",
      message: expect.stringMatching(
        new RegExp(
          `^the config needs \\d+ file descriptors \\(\\d+ for its listeners and servers, \\d+ for HAProxy itself\\), more than HAProxy may open on this node \\(its hard limit, ulimit -Hn: ${limit}\\)`,
        ),
      ),
    });
    expect(refused.applied!.key).not.toBe(refused.published.key);
    expect(await n.get("/web/x")).toEqual({ status: 200, body: "A /x" });
    expect(await n.reloads()).toBe(reloads);
    expect(await count(agent.metrics.reloadFailures)).toBe(0);

    // The culprit deleted, and another tenant's change: the next config runs. The culprit's
    // backends are not left behind (they would hold more slots than the spares): the layout starts
    // afresh, which is the one the node still runs, so the change needs not even a reload.
    const moved = [...svc("web", [A]), ...svc("api", [C])];
    const next = await offer(n, agent, moved, 120);
    expect(next.error).toBeNull();
    expect(next.applied).toMatchObject({ key: next.published.key, how: "runtime" });
    expect(await n.get("/api/x")).toEqual({ status: 200, body: "C /x" });
    expect(n.lastConfig()).not.toContain("default_wide_");
  });

  it("takes the next config once a small culprit is gone, when the function knows the nodes' room from their reports", async () => {
    const n = await node({ spareBackends: 16, activeChecks: "true" });
    const tenants = [...svc("web", [A]), ...svc("api", [B])];
    await n.publish(tenants, 100);
    const limit = needOf(n.lastConfig()) + 50;
    const agent = await start(n, { haproxyBin: limitedHaproxy(n.dir, limit) });
    // What the function reads from the agents' reports in the store.
    n.renderContext.useRoom(roomForFleet([agent.status()]));

    // Nine pods are more than a spare's slots: a backend of its own, and spares of its size.
    const big = svc("big", [
      "127.0.0.5",
      "127.0.0.6",
      "127.0.0.7",
      "127.0.0.8",
      "127.0.0.9",
      "127.0.0.10",
      "127.0.0.11",
      "127.0.0.12",
      "127.0.0.13",
    ]);
    const refused = await offer(n, agent, [...tenants, ...big], 110);
    expect(refused.error).toMatchObject({ stage: "check", message: expect.stringContaining("file descriptors") });

    // Gone again, its backend would be left behind (the spares' slots allow it), and the config
    // would need as much as the refused one: over the room, so the layout starts afresh.
    const next = await offer(n, agent, [...svc("web", [A]), ...svc("api", [C])], 120);
    expect(next.error).toBeNull();
    expect(next.applied).toMatchObject({ key: next.published.key, how: "runtime" });
    expect(await n.get("/api/x")).toEqual({ status: 200, body: "C /x" });
    expect(n.lastConfig()).not.toContain("backend default_big_80 ");
  });
});

describe("servers without health checks", () => {
  it("cost no descriptor: thousands of them start under a limit far below their number", async () => {
    const lb = await loopbackOptions({ spareBackends: 0 });
    world.cleanups.push(() => lb.cleanup());
    const pods = Array.from({ length: 100 }, (_, i) => `10.1.${i >> 8}.${(i & 255) + 1}`);
    const items = Array.from({ length: 30 }, (_, i) => svc(`web${i}`, pods)).flat();
    const config = new RenderContext(lb.options).render(snapshotFromDocuments([list(items, "5")])).config;
    const servers = config.match(/^ {4}server /gm)!.length;
    expect(servers).toBeGreaterThan(3000);
    expect(needOf(config)).toBeLessThan(500);
    expect(await startUnder(1000, lb.dir, config)).toBe("serves");
  });
});
