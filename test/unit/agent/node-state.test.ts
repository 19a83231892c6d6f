import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../../shared/adapters/log.js";
import { createAgentMetrics } from "../../../shared/agent/metrics.js";
import { NodeState } from "../../../shared/agent/node-state.js";
import { configDigest, DIGEST_KINDS } from "../../../shared/core/config-digest.js";

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
