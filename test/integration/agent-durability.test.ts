import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { Agent } from "../../shared/agent/agent.js";
import { count, echoPods, testNode, web, type Echo, type Node } from "../support/agent.js";
import { requireHaproxy } from "../support/haproxy.js";
import { waitFor } from "../support/net.js";
import { startS3, type TestS3 } from "../support/s3.js";

// writeFileAtomic renames the new file into place, then fsyncs the directory. When only that last
// step fails, the file already holds the new (checked) config: the agent must count it as written,
// not report a failure and undo a config that the file (and so the next reload or restart) runs.

const failing = vi.hoisted(() => ({ dirSync: null as string | null }));

vi.mock("node:fs/promises", async (importOriginal) => {
  const fs = await importOriginal<typeof import("node:fs/promises")>();
  const open: typeof fs.open = async (...args) => {
    const handle = await fs.open(...args);
    if (failing.dirSync === null || args[0] !== failing.dirSync) return handle;
    return new Proxy(handle, {
      get(target, prop) {
        if (prop === "sync") return () => Promise.reject(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  return { ...fs, default: { ...fs, open }, open };
});

const A = "127.0.0.2";
const B = "127.0.0.3";
const C = "127.0.0.4";

let s3: TestS3;
let pods: Echo;
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  requireHaproxy();
  s3 = await startS3();
  pods = await echoPods({ [A]: "A", [B]: "B", [C]: "C" });
});

afterAll(async () => {
  await pods?.close();
  await s3?.stop();
});

afterEach(async () => {
  failing.dirSync = null;
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function node(): Promise<Node> {
  const n = await testNode(s3);
  cleanups.push(() => n.cleanup());
  return n;
}

const appliedKey = (agent: Agent, key: string) => waitFor(`applied ${key}`, async () => (agent.status().applied?.key === key ? true : undefined));

async function answering(n: Node, path: string, times = 8): Promise<string[]> {
  const seen = new Set<string>();
  for (let i = 0; i < times; i++) seen.add((await n.get(path)).body.split(" ")[0]!);
  return [...seen].sort();
}

describe("a config file replaced whose directory cannot be synced", () => {
  it("counts as written: a runtime change and a structural change are applied, not undone", async () => {
    const n = await node();
    await n.publish(web("web", pods.port, [A]), 100);
    const agent = await n.start();
    cleanups.push(() => agent.stop());
    failing.dirSync = dirname(n.configPath);

    const toB = await n.publish(web("web", pods.port, [B]), 110);
    await n.notify(agent, toB);
    await appliedKey(agent, toB.key);
    expect(agent.status()).toMatchObject({ applied: { how: "runtime" }, lastError: null, backoff: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toB.key)).config);
    expect(await answering(n, "/web/")).toEqual(["B"]);

    const structural = await n.publish([...web("web", pods.port, [B]), ...web("api", pods.port, [C])], 120);
    await n.notify(agent, structural);
    await appliedKey(agent, structural.key);
    expect(agent.status()).toMatchObject({ applied: { how: "reload" }, lastError: null, backoff: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(structural.key)).config);
    expect(await answering(n, "/api/")).toEqual(["C"]);
    expect(await count(agent.metrics.applyFailures)).toBe(0);
  });
});
