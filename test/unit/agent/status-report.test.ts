import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "../../../shared/adapters/log.js";
import { SETTLE_MS, startStatusReporter } from "../../../shared/agent/status-report.js";

describe("startStatusReporter", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function reporter() {
    const writes: unknown[] = [];
    let applied = 0;
    const r = startStatusReporter({
      store: { putStatus: async (_node, status) => void writes.push(status) },
      node: "n1",
      intervalMs: 60_000,
      report: () => ({ applied }),
      log: createLogger("status-reporter-test", "silent"),
    });
    return { r, writes, apply: () => void applied++ };
  }

  it("writes at start, then a second after a change, with every change of that second in one write", async () => {
    const { r, writes, apply } = reporter();
    await vi.advanceTimersByTimeAsync(0);
    expect(writes).toEqual([{ applied: 0 }]);
    for (let i = 0; i < 5; i++) {
      apply();
      r.changed();
      await vi.advanceTimersByTimeAsync(100);
    }
    expect(writes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(SETTLE_MS - 500);
    expect(writes).toEqual([{ applied: 0 }, { applied: 5 }]);
    // The next change starts another second.
    apply();
    r.changed();
    await vi.advanceTimersByTimeAsync(SETTLE_MS - 1);
    expect(writes).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(writes).toEqual([{ applied: 0 }, { applied: 5 }, { applied: 6 }]);
    await r.stop();
  });

  it("writes nothing more once stopped, a change still settling included", async () => {
    const { r, writes, apply } = reporter();
    await vi.advanceTimersByTimeAsync(0);
    apply();
    r.changed();
    await r.stop();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(writes).toEqual([{ applied: 0 }]);
    // A change reported after the stop holds no timer that would keep the process up.
    r.changed();
    expect(vi.getTimerCount()).toBe(0);
  });
});
