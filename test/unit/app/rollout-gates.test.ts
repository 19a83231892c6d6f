import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../../shared/adapters/log.js";
import { createMemoryBlobStore } from "../../../shared/adapters/memory-blob-store.js";
import { createStore, type ObjectStore } from "../../../shared/adapters/store.js";
import { createRolloutGates } from "../../../shared/app/rollout-gates.js";
import type { RolloutSettings } from "../../../shared/core/rollout/rollout.js";
import { rolloutTarget, windowOf } from "../../../shared/core/rollout/rollout-record.js";
import { DEFAULT_THRESHOLDS } from "../../../shared/core/rollout/gate.js";
import { parseWaves } from "../../../shared/core/rollout/waves.js";

// The function's runner on the in-memory store: what it reads and writes, and that the record alone
// carries a rollout from one function instance to the next. The state machine's own cases are in
// test/unit/core/rollout/rollout.test.ts; the whole path through agents and HAProxy in
// test/integration/canary-rollout.test.ts.

const settings: RolloutSettings = {
  waves: parseWaves("1,100%"),
  bakeMs: 10_000,
  deadlineMs: 60_000,
  fallback: "hold",
  convergeMs: 30_000,
  thresholds: DEFAULT_THRESHOLDS,
};
const log = createLogger("rollout-gates-test", "silent");
const NODES = ["node-a", "node-b", "node-c"];

const config = (timeout: string, server = "10.0.0.1") => `global
    stats socket /run/haproxy/admin.sock mode 600 level admin

defaults
    mode http
    timeout connect ${timeout}

backend default_web_80
    balance roundrobin
    server s1 ${server}:8080
`;

function fixture() {
  const blobs = createMemoryBlobStore({ bucket: "b", prefix: "lb/" });
  const store = createStore(blobs);
  let clock = Date.parse("2026-12-02T10:00:00Z");
  const now = () => new Date(clock);
  const tick = (ms: number) => {
    clock += ms;
  };
  let revision = 10;
  const publish = async (text: string) => {
    const r = await store.publish({ config: text, revision: String(revision++), generator: "servicelb/test" });
    return { key: r.newest.key, sha256: r.newest.sha256 };
  };
  /** Each node reports running what rollout.json names for it, with these counters. */
  const report = async (errorsOnCanary: number) => {
    const record = await store.getRollout();
    for (const node of NODES) {
      const target = record ? rolloutTarget(record, node) : null;
      const canary = record?.rollout !== null && target?.key === record?.rollout?.candidate.key;
      await store.putStatus(node, {
        node,
        applied: target && {
          key: target.key,
          sha256: target.sha256,
          revision: null,
          appliedAt: now().toISOString(),
          how: "reload",
        },
        lastError: null,
        backoff: null,
        haproxy: { running: true },
        reportIntervalSeconds: 60,
        reportedAt: now().toISOString(),
        agent: "servicelb/test",
        traffic: record?.rollout
          ? {
              window: windowOf(record.rollout),
              key: target!.key,
              sampledAt: now().toISOString(),
              backends: { default_web_80: { requests: 1000, errors: canary ? errorsOnCanary : 0, rtimeMs: 3 } },
            }
          : null,
      });
    }
  };
  return { store, blobs, now, tick, publish, report };
}

const gates = (store: ObjectStore, now: () => Date, s: RolloutSettings | null = settings) =>
  createRolloutGates(store, s, log, now);

describe("the rollout runner", () => {
  it("writes the first record at the first pass, then sends an endpoint change to every node at once", async () => {
    const f = fixture();
    const first = await f.publish(config("5s"));
    const step = await gates(f.store, f.now).step(first);
    expect(step?.written).toBe(true);
    expect((await f.store.getRollout())?.stable).toEqual(first);
    await f.report(0);
    const moved = await f.publish(config("5s", "10.0.0.2"));
    const listed: string[] = [];
    f.blobs.inject = (operation, key) => {
      if (operation === "list") listed.push(key);
      return undefined;
    };
    const again = await gates(f.store, f.now).step(moved);
    expect(again?.record).toMatchObject({ stable: moved, rollout: null });
    // No node's report is read for a change that goes everywhere at once.
    expect(listed).toEqual([]);
  });

  it("carries a rollout from one instance to a new one through rollout.json alone, wave by wave", async () => {
    const f = fixture();
    const first = await f.publish(config("5s"));
    await gates(f.store, f.now).step(first);
    await f.report(0);
    const second = await f.publish(config("6s"));
    const started = await gates(f.store, f.now).step(second);
    expect(started?.record.rollout).toMatchObject({ state: "rolling", wave: 0, candidate: second });
    // The instance is replaced; the new one reads the record and judges the wave.
    await f.report(0);
    f.tick(10_001);
    const advanced = await gates(f.store, f.now).step(second);
    expect(advanced?.record.rollout).toMatchObject({ wave: 1 });
    await f.report(0);
    f.tick(10_001);
    const done = await gates(f.store, f.now).step(second);
    expect(done?.record).toMatchObject({ stable: second, rollout: null });
    expect(done?.record.history.at(-1)).toMatchObject({ key: second.key, outcome: "promoted" });
  });

  it("rolls a wave whose canary answers 5xx back, with the figures in rollout.json", async () => {
    const f = fixture();
    const first = await f.publish(config("5s"));
    await gates(f.store, f.now).step(first);
    await f.report(0);
    const bad = await f.publish(config("6s"));
    await gates(f.store, f.now).step(bad);
    await f.report(900);
    f.tick(2000);
    const failed = await gates(f.store, f.now).step(bad);
    const record = await f.store.getRollout();
    expect(failed?.record.rollout?.state).toBe("failed");
    expect(record?.rollout?.reason).toMatch(
      /^default_web_80: 5xx rate 90\.00% on the canary against 0\.00% on the control/,
    );
    expect(NODES.map((n) => rolloutTarget(record!, n).key)).toEqual([first.key, first.key, first.key]);
  });

  it("stores the stable config with the newest endpoints as a stable track while a rollout runs, and deletes it when replaced", async () => {
    const f = fixture();
    const first = await f.publish(config("5s"));
    await gates(f.store, f.now).step(first);
    await f.report(0);
    const second = await f.publish(config("6s"));
    await gates(f.store, f.now).step(second);
    const moved = await f.publish(config("6s", "10.0.0.9"));
    const step = await gates(f.store, f.now).step(moved);
    const track = step!.record.stable;
    expect(track.key).toMatch(/^lb\/tracks\/[0-9a-f]{64}\.cfg$/);
    expect(step!.record.rollout?.candidate).toEqual(moved);
    // The stable structure (timeout 5s) with the newest endpoint, verified by its name.
    expect((await f.store.get(track.key)).config).toBe(config("5s", "10.0.0.9"));
    const again = await f.publish(config("6s", "10.0.0.10"));
    const next = await gates(f.store, f.now).step(again);
    expect((await f.store.get(next!.record.stable.key)).config).toBe(config("5s", "10.0.0.10"));
    await expect(f.store.get(track.key)).rejects.toThrow(/does not exist/);
  });

  it("refuses a stable track whose body is not the digest its name says", async () => {
    const f = fixture();
    const stored = await f.store.putTrack(config("5s"), "10");
    await f.blobs.put(stored.key, config("7s"), { contentType: "text/plain", metadata: { sha256: stored.sha256 } });
    await expect(f.store.get(stored.key)).rejects.toThrow(/is corrupt: the body's sha256 digest/);
  });

  it("warns, once, of agents that run without --canary: a rollout cannot hold them back", async () => {
    const f = fixture();
    const lines: string[] = [];
    const memory = pino(
      { level: "warn" },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString("utf8"));
          done();
        },
      }),
    );
    const first = await f.publish(config("5s"));
    const runner = createRolloutGates(f.store, settings, memory, f.now);
    await runner.step(first);
    await f.store.putStatus("edge-old", {
      node: "edge-old",
      applied: {
        key: first.key,
        sha256: first.sha256,
        revision: null,
        appliedAt: f.now().toISOString(),
        how: "reload",
      },
      lastError: null,
      backoff: null,
      haproxy: { running: true },
      reportIntervalSeconds: 60,
      reportedAt: f.now().toISOString(),
      agent: "servicelb/test",
    });
    const second = await f.publish(config("6s"));
    await runner.step(second);
    await runner.step(second);
    const warnings = lines.filter((l) => l.includes("agents without --canary"));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ nodes: ["edge-old"], count: 1 });
  });

  it("with canary off deletes a rollout.json left behind, once, and writes nothing", async () => {
    const f = fixture();
    const first = await f.publish(config("5s"));
    await gates(f.store, f.now).step(first);
    const off = gates(f.store, f.now, null);
    expect(await off.step(first)).toBeNull();
    expect(await f.store.getRollout()).toBeNull();
  });

  it("leaves a rollout.json that is not a record alone: the agents hold on it, and so does the function", async () => {
    const f = fixture();
    const first = await f.publish(config("5s"));
    await f.blobs.put("lb/rollout.json", '{"version":2}', { contentType: "application/json" });
    await expect(f.store.getRollout()).rejects.toThrow(/lb\/rollout\.json.* is not a rollout record: version/);
    expect(await gates(f.store, f.now).step(first)).toBeNull();
    expect((await f.blobs.get("lb/rollout.json"))?.body.toString()).toBe('{"version":2}');
  });
});
