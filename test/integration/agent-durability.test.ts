import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { A, agentWorld, B, C, count, web } from "../support/agent.js";

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
        if (prop === "sync")
          return () => Promise.reject(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  return { ...fs, default: { ...fs, open }, open };
});

const world = agentWorld();
const { node, answering, appliedKey, cleanups } = world;

afterEach(() => {
  failing.dirSync = null;
});

describe("a config file replaced whose directory cannot be synced", () => {
  it("counts as written: a runtime change and a structural change are applied, not undone", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await n.start();
    cleanups.push(() => agent.stop());
    failing.dirSync = dirname(n.configPath);

    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await appliedKey(agent, toB.key);
    expect(agent.status()).toMatchObject({ applied: { how: "runtime" }, lastError: null, backoff: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toB.key)).config);
    expect(await answering(n, "/web/")).toEqual(["B"]);

    const structural = await n.publish([...web("web", world.pods.port, [B]), ...web("api", world.pods.port, [C])], 120);
    await n.notify(agent, structural);
    await appliedKey(agent, structural.key);
    expect(agent.status()).toMatchObject({ applied: { how: "reload" }, lastError: null, backoff: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(structural.key)).config);
    expect(await answering(n, "/api/")).toEqual(["C"]);
    expect(await count(agent.metrics.applyFailures)).toBe(0);
  });
});
