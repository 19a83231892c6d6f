import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../../shared/adapters/log.js";
import { createAgentMetrics } from "../../../shared/agent/metrics.js";
import { NodeState } from "../../../shared/agent/node-state.js";
import { configDigest, DIGEST_KINDS } from "../../../shared/core/publish/config-digest.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function restarted(disk: string, recorded: string) {
  const dir = mkdtempSync(join(tmpdir(), "node-state-"));
  dirs.push(dir);
  return new NodeState({
    configPath: join(dir, "haproxy.cfg"),
    stateFile: join(dir, "state.json"),
    backoff: { initialMs: 1000, maxMs: 1000 },
    metrics: createAgentMetrics(),
    log: createLogger("node-state-test", "silent"),
    disk,
    saved: {
      applied: { key: "configs/k.cfg", sha256: recorded, revision: "7", appliedAt: "t", how: "reload" },
      lastError: null,
    },
  });
}

const text = "global\n  daemon\nbackend a\n  server s 10.0.0.1:80\nbackend b\n  server s 10.0.0.2:80\n";

describe("a restarted agent's node state", () => {
  it.each(DIGEST_KINDS)("knows the config on disk as the one recorded by a %s digest", (kind) => {
    const state = restarted(text, configDigest(kind, text));
    expect(state.current).toMatchObject({ key: "configs/k.cfg", revision: "7", sha256: configDigest(kind, text) });
  });

  it.each(DIGEST_KINDS)("does not name a config on disk that differs from the one recorded by %s", (kind) => {
    const state = restarted(text.replace("10.0.0.2", "10.0.0.3"), configDigest(kind, text));
    expect(state.current).toMatchObject({ key: null, revision: null });
  });
});

describe("the node state's transitions", () => {
  /** A store key in publish order (core/publish/config-key.ts). */
  const key = (n: number) => `configs/${String(n).padStart(20, "0")}-${"0".repeat(16)}.cfg`;
  const applied = (text: string, n: number) => ({
    key: key(n),
    config: text,
    sha256: configDigest("sha256", text),
    revision: String(n),
  });
  const known = (text: string, n: number) => ({
    text,
    key: key(n),
    sha256: configDigest("sha256", text),
    revision: String(n),
  });
  const later = text.replace("10.0.0.2", "10.0.0.9");

  async function serving() {
    const state = restarted(text, "sha256:unrecorded");
    await state.succeed(applied(text, 1), "start", performance.now());
    state.haproxyServes();
    return state;
  }

  it("a reload onto the file drops what ran through the runtime API since, and says so", async () => {
    const state = await serving();
    state.ranThroughRuntime(known(later, 2));
    state.lostTrackOfSlots();
    expect(state.liveUnknown).toBe(true);
    expect(state.reloadedFromDisk()).toBe(true);
    expect(state.current).toBe(state.onDisk);
    expect(state.current?.key).toBe(key(1));
    expect(state.liveUnknown).toBe(false);
    // Nothing ran ahead of the file: nothing dropped.
    expect(state.reloadedFromDisk()).toBe(false);
  });

  it("an undone runtime change runs the config it came from", async () => {
    const state = await serving();
    const before = state.current!;
    state.ranThroughRuntime(known(later, 2));
    expect(state.current?.key).toBe(key(2));
    state.undidRuntime(before);
    expect(state.current).toBe(before);
    expect(state.onDisk).toBe(before);
  });

  it("a restart by the supervisor runs the file as read, forgets a failure, and names what it dropped", async () => {
    const state = await serving();
    await state.fail("apply", key(9), "reload failed");
    expect(state.afterKey()).toBe(key(9));
    state.ranThroughRuntime(known(later, 2));
    state.lostTrackOfSlots();
    expect(state.restartedOn(text)).toBe(key(2));
    expect(state.current).toBe(state.onDisk);
    expect(state.liveUnknown).toBe(false);
    expect(state.failed).toBe(false);
    expect(state.afterKey()).toBe(key(1));
    // A file the agent did not record: its key is unknown.
    expect(state.restartedOn(later)).toBeNull();
    expect(state.current).toMatchObject({ text: later, key: null, revision: null });
  });

  it("an applied config is what runs and what the file holds, its slots known", async () => {
    const state = await serving();
    state.lostTrackOfSlots();
    await state.succeed(applied(later, 3), "reload", performance.now());
    expect(state.current).toBe(state.onDisk);
    expect(state.current?.key).toBe(key(3));
    expect(state.liveUnknown).toBe(false);
    expect(state.status().applied).toMatchObject({ key: key(3), how: "reload" });
  });
});
