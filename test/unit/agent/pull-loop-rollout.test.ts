import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { StatRow } from "../../../shared/adapters/haproxy/runtime.js";
import { createLogger } from "../../../shared/adapters/log.js";
import { type Pin, StoreError, type StoredConfig } from "../../../shared/adapters/store.js";
import { PullLoop } from "../../../shared/agent/pull-loop.js";
import { createAgentMetrics } from "../../../shared/agent/metrics.js";
import { EMPTY_STATE } from "../../../shared/agent/node-state.js";
import { backendCounters, TrafficSampler } from "../../../shared/agent/traffic-sampler.js";
import { initialRecord, type RolloutRecord } from "../../../shared/core/rollout/rollout-record.js";
import { sha256 } from "../../../shared/core/publish/sha256.js";

// The pull loop with --canary (docs/design.md#canary-rollouts), HAProxy's ports faked as in
// applier.test.ts: each node runs exactly what rollout.json names for it, a pin wins, and a
// rollout.json that is not a record holds the node. Through real agents and HAProxy:
// test/integration/canary-rollout.test.ts.

const config = (addr: string, extra = "") => `global
    stats socket /run/haproxy/admin.sock mode 600 level admin

backend default_web_80${extra}
    server s1 ${addr}
`;
const stored = (n: number, text: string): StoredConfig => ({
  key: `configs/${String(n).padStart(20, "0")}-${sha256(text).slice(0, 16)}.cfg`,
  revision: String(n),
  sha256: sha256(text),
  config: text,
});
const ref = (c: StoredConfig) => ({ key: c.key, sha256: c.sha256 });

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function world(node: string) {
  const dir = mkdtempSync(join(tmpdir(), "applier-rollout-"));
  dirs.push(dir);
  const configs: StoredConfig[] = [];
  const pin: { value: Pin | null } = { value: null };
  const rollout: { value: RolloutRecord | null | string } = { value: null };
  const metrics = createAgentMetrics();
  const applier = new PullLoop({
    canaryNode: node,
    store: {
      history: async () =>
        [...configs].reverse().map((c) => ({
          key: c.key,
          epoch: 0,
          revision: c.revision,
          seq: 0,
          sha256Prefix: c.sha256.slice(0, 16),
          size: c.config.length,
          lastModified: new Date(),
        })),
      get: async (key) => {
        const found = configs.find((c) => c.key === key);
        if (!found) throw new StoreError(`${key} does not exist`, { transient: false });
        return found;
      },
      getPin: async () => pin.value,
      getNewestHint: async () => null,
      getRollout: async () => {
        if (typeof rollout.value === "string") throw new StoreError(rollout.value, { transient: false });
        return rollout.value;
      },
    },
    haproxy: { running: true, start: async () => undefined, reload: async () => ({ ok: true }) },
    configPath: join(dir, "haproxy.cfg"),
    stateFile: join(dir, "state.json"),
    haproxyBin: "haproxy",
    checkTimeoutMs: 1000,
    minReloadIntervalMs: 0,
    backoff: { initialMs: 60_000, maxMs: 60_000 },
    metrics,
    log: createLogger("applier-rollout-test", "silent"),
    disk: null,
    saved: EMPTY_STATE,
    check: async () => ({ ok: true, warnings: [] }),
    runtime: { runAll: async () => undefined, swapPatterns: async () => undefined, serversState: async () => "1\n#\n" },
  });
  /** What the agent's /metrics says of the rollout: its wave, and whether it runs the candidate. */
  const gauges = async () => {
    const page = await metrics.registry.metrics();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(page)?.[1]);
    return { wave: value("servicelb_agent_rollout_wave"), candidate: value("servicelb_agent_rollout_candidate") };
  };
  return { applier, configs, pin, rollout, gauges };
}

/** A record whose rollout admits `admitted` to `candidate`, the others on `stable`. */
function rolling(stable: StoredConfig, candidate: StoredConfig, admitted: string[], all: string[]): RolloutRecord {
  const at = new Date().toISOString();
  return {
    ...initialRecord(ref(stable), new Date()),
    rollout: {
      id: candidate.key,
      candidate: ref(candidate),
      state: "rolling",
      wave: 0,
      sizes: [admitted.length, all.length],
      order: [...admitted, ...all.filter((n) => !admitted.includes(n))],
      startedAt: at,
      waveStartedAt: at,
      reason: null,
      gate: null,
    },
  };
}

describe("the pull loop with --canary", () => {
  it("runs the candidate on an admitted node and the stable config, though older, on the others", async () => {
    const stable = stored(1, config("10.0.0.1:80"));
    const candidate = stored(2, config("10.0.0.1:80", "\n    timeout server 9s"));
    for (const [node, expected, gauges] of [
      ["edge-a", candidate, { wave: 1, candidate: 1 }],
      ["edge-b", stable, { wave: 2, candidate: 0 }],
    ] as const) {
      const w = world(node);
      w.configs.push(stable, candidate);
      expect(await w.gauges()).toEqual({ wave: 0, candidate: 0 });
      w.rollout.value = rolling(stable, candidate, ["edge-a"], ["edge-a", "edge-b"]);
      await w.applier.sync();
      expect(w.applier.appliedKey, node).toBe(expected.key);
      expect(await w.gauges(), node).toEqual(gauges);
      expect(w.applier.rolloutWindow).toBe(`${candidate.key}#0`);
      // Newer configs in the store do not move it: only the record does.
      w.configs.push(stored(3, config("10.0.0.3:80", "\n    timeout server 9s")));
      await w.applier.sync();
      expect(w.applier.appliedKey, node).toBe(expected.key);
    }
  });

  it("goes back to the stable config when its wave fails, and a pin wins over the record", async () => {
    const stable = stored(1, config("10.0.0.1:80"));
    const candidate = stored(2, config("10.0.0.1:80", "\n    timeout server 9s"));
    const w = world("edge-a");
    w.configs.push(stable, candidate);
    const record = rolling(stable, candidate, ["edge-a"], ["edge-a", "edge-b"]);
    w.rollout.value = record;
    await w.applier.sync();
    expect(w.applier.appliedKey).toBe(candidate.key);
    w.rollout.value = { ...record, rollout: { ...record.rollout!, state: "failed", reason: "5xx" } };
    await w.applier.sync();
    expect(w.applier.appliedKey).toBe(stable.key);
    w.pin.value = { key: candidate.key, sha256: candidate.sha256, pinnedAt: new Date().toISOString() };
    await w.applier.sync();
    expect(w.applier.appliedKey).toBe(candidate.key);
  });

  it("holds at what it runs while rollout.json is not a record, and says so", async () => {
    const stable = stored(1, config("10.0.0.1:80"));
    const w = world("edge-a");
    w.configs.push(stable);
    w.rollout.value = initialRecord(ref(stable), new Date());
    await w.applier.sync();
    w.configs.push(stored(2, config("10.0.0.2:80")));
    w.rollout.value = "s3://b/lb/rollout.json is not JSON";
    await w.applier.sync();
    expect(w.applier.appliedKey).toBe(stable.key);
    expect(w.applier.status().lastError?.message).toBe(
      `rollout.json is not a rollout record (s3://b/lb/rollout.json is not JSON): holding at the last config it named, ${stable.key} until rollout.json is a record again or is removed`,
    );
    // Removed: the node follows the newest again.
    w.rollout.value = null;
    await w.applier.sync();
    expect(w.applier.appliedKey).toBe(w.configs[1]!.key);
  });
});

describe("TrafficSampler", () => {
  const rows = (req: number, errors: number, rtime = 4): StatRow[] => [
    { pxname: "http", svname: "FRONTEND", req_tot: "999", hrsp_5xx: "9" },
    { pxname: "default_web_80", svname: "s1", req_tot: "", hrsp_5xx: "1" },
    {
      pxname: "default_web_80",
      svname: "BACKEND",
      req_tot: String(req),
      hrsp_5xx: String(errors),
      rtime: String(rtime),
    },
  ];

  it("reads the backend rows of show stat", () => {
    expect(backendCounters(rows(10, 2))).toEqual(
      new Map([["default_web_80", { requests: 10, errors: 2, rtimeMs: 4 }]]),
    );
  });

  it("counts from the start of each window, from zero after a reload, and reports nothing outside a rollout", () => {
    const s = new TrafficSampler();
    s.record(rows(100, 5), "k#0", "k");
    expect(s.report()?.backends).toEqual({});
    s.record(rows(150, 6), "k#0", "k");
    expect(s.report()?.backends).toEqual({ default_web_80: { requests: 50, errors: 1, rtimeMs: 4 } });
    // A reload: HAProxy counts from zero again.
    s.record(rows(20, 0), "k#0", "k");
    expect(s.report()?.backends).toEqual({ default_web_80: { requests: 20, errors: 0, rtimeMs: 4 } });
    s.record(rows(30, 0), "k#1", "k");
    expect(s.report()).toMatchObject({ window: "k#1", backends: {} });
    s.record([], null, null);
    expect(s.report()).toBeNull();
  });
});
