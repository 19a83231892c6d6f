import { describe, expect, it } from "vitest";
import type { StoredConfig } from "../../../shared/adapters/store.js";
import type { ApplyStages, PullStages } from "../../../shared/agent/pull-stages.js";
import { traceAgent } from "../../../shared/app/agent-trace.js";

const config = { key: "k2", sha256: "s", config: "", revision: "2" } as StoredConfig;

function traced() {
  const events: Array<[string, Record<string, unknown> | undefined]> = [];
  const decorators = traceAgent((event, fields) => events.push([event, fields]));
  const pull: PullStages = {
    notify: () => "pulling",
    busy: () => true,
    running: () => "k1",
    pull: async () => "done",
    take: async (c) => (c.key === "k0" ? "stale" : "done"),
  };
  const apply: ApplyStages = {
    check: async (c) => ({ ok: c.key !== "bad", serverState: null }),
    runtime: async () => undefined,
    start: async () => undefined,
    reload: async () => ({ ok: true }),
    applied: async () => undefined,
  };
  return { events, pull: decorators.pull!(pull), apply: decorators.apply!(apply) };
}

describe("the agent's stage trace", () => {
  it("traces a ping with whether a pull was under way, and a pull from its start to the config it found", async () => {
    const t = traced();
    expect(t.pull.notify("k2", "s")).toBe("pulling");
    await t.pull.pull();
    await t.pull.take(config, "ping");
    expect(t.events).toEqual([
      ["notify", { key: "k2", busy: true }],
      ["pull.start", undefined],
      ["pull.end", { key: "k2", via: "ping" }],
    ]);
  });

  it("traces a config older than the running one as stale, with the running key", async () => {
    const t = traced();
    expect(await t.pull.take({ ...config, key: "k0" }, "list")).toBe("stale");
    expect(t.events.at(-1)).toEqual(["take.stale", { key: "k0", running: "k1" }]);
  });

  it("traces a check only when it passed, and each apply stage with the config's key", async () => {
    const t = traced();
    await t.apply.check({ ...config, key: "bad" });
    await t.apply.check(config);
    await t.apply.runtime(config, { kind: "runtime", socket: "/s", commands: [], slots: 3, files: [], emptying: [] });
    await t.apply.start("k2");
    await t.apply.reload("k1", "undo");
    await t.apply.applied(config, "runtime", 0);
    expect(t.events).toEqual([
      ["check.done", { key: "k2" }],
      ["runtime.done", { key: "k2", changes: 3, files: 0 }],
      ["start.end", { key: "k2" }],
      ["reload.start", { key: "k1", why: "undo" }],
      ["reload.end", { key: "k1" }],
      ["applied", { key: "k2", how: "runtime" }],
    ]);
  });
});
