import { describe, expect, it } from "vitest";
import type { ProcEntry, ProcStatus } from "../../../shared/adapters/haproxy/master.js";
import { type NodeHealthParts, nodeHealth } from "../../../shared/agent/node-health.js";

const entry = (pid: number): ProcEntry => ({
  pid,
  reloads: 0,
  uptime: "0d00h00m05s",
  uptimeSeconds: 5,
  version: "2.6",
});
const proc = (master: number, workers: number[]): ProcStatus => ({
  master: { ...entry(master), failedReloads: 0 },
  workers: workers.map(entry),
  oldWorkers: [],
});
const freshPull = {
  lastSuccessAt: "2026-01-01T00:00:00Z",
  consecutiveFailures: 0,
  lastFailure: null,
  stale: false,
  staleAfterSeconds: 90,
};

function parts(over: Partial<NodeHealthParts> = {}): NodeHealthParts {
  return {
    applier: { serving: true, status: () => ({ lastError: null }) },
    haproxy: {
      running: true,
      pid: 100,
      supervision: () => ({ restarts: 0, lastRestart: null, pendingRestart: null }),
    },
    reloading: () => false,
    pull: () => freshPull,
    showProc: async () => proc(100, [101]),
    masterSocket: "/run/master.sock",
    ...over,
  };
}

describe("nodeHealth", () => {
  it("is ok when a config is applied and the supervised master answers with a worker", async () => {
    await expect(nodeHealth(parts())()).resolves.toEqual({ ok: true });
  });

  it("is not ok before a config is applied, with the last error", async () => {
    const applier = {
      serving: false,
      status: () => ({ lastError: { stage: "check" as const, key: "k", message: "bad line 3", at: "t" } }),
    };
    await expect(nodeHealth(parts({ applier }))()).resolves.toEqual({
      ok: false,
      reason: "no config applied yet (last error: bad line 3)",
    });
  });

  it("says when a restart backing off brings HAProxy back", async () => {
    const haproxy = {
      running: false,
      pid: undefined,
      supervision: () => ({
        restarts: 3,
        lastRestart: null,
        pendingRestart: { at: "2026-01-01T00:00:02Z", delayMs: 2000, quickCrashes: 3 },
      }),
    };
    await expect(nodeHealth(parts({ haproxy }))()).resolves.toEqual({
      ok: false,
      reason:
        "HAProxy is not running; the agent restarts it at 2026-01-01T00:00:02Z (3 quick crashes in a row: backing off)",
    });
  });

  it("does not ask the master's CLI during a reload the agent ordered", async () => {
    const showProc = async (): Promise<ProcStatus> => {
      throw new Error("the master re-executes");
    };
    await expect(nodeHealth(parts({ reloading: () => true, showProc }))()).resolves.toEqual({ ok: true });
    await expect(nodeHealth(parts({ showProc }))()).resolves.toEqual({
      ok: false,
      reason: "HAProxy master does not answer: the master re-executes",
    });
  });

  it("is not ok when another HAProxy answers the socket, or the master has no worker", async () => {
    await expect(nodeHealth(parts({ showProc: async () => proc(200, [201]) }))()).resolves.toEqual({
      ok: false,
      reason: "the master socket is answered by another HAProxy (pid 200)",
    });
    await expect(nodeHealth(parts({ showProc: async () => proc(100, []) }))()).resolves.toEqual({
      ok: false,
      reason: "HAProxy has no worker",
    });
  });

  it("stays ok with a warning when pulls are stale: a store outage takes no node out", async () => {
    const pull = () => ({ ...freshPull, stale: true });
    await expect(nodeHealth(parts({ pull }))()).resolves.toEqual({
      ok: true,
      warning:
        "no pull from the store has completed since 2026-01-01T00:00:00Z (over 90 s); HAProxy serves the last applied config",
    });
  });
});
