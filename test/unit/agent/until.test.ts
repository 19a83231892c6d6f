import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { until } from "../../../shared/agent/until.js";

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("until", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("waits one period first unless immediate, then runs every period", async () => {
    let runs = 0;
    const loop = until(async () => void runs++, { name: "t", periodMs: 100 });
    await vi.advanceTimersByTimeAsync(99);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(1);
    await vi.advanceTimersByTimeAsync(300);
    expect(runs).toBe(4);
    await loop.stop();

    let eager = 0;
    const now = until(async () => void eager++, { name: "t", periodMs: 100, immediate: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(eager).toBe(1);
    await now.stop();
  });

  it("keeps going when f fails, counting and reporting each failure", async () => {
    let runs = 0;
    const failures: unknown[] = [];
    const warn = vi.fn();
    const loop = until(
      async () => {
        runs++;
        if (runs % 2 === 1) throw new Error(`boom ${runs}`);
      },
      { name: "poll", periodMs: 10, immediate: true, onFailure: (e) => failures.push(e), log: { warn } as never },
    );
    await vi.advanceTimersByTimeAsync(45);
    expect(runs).toBe(5);
    expect(loop.failures).toBe(3);
    expect(failures.map((e) => (e as Error).message)).toEqual(["boom 1", "boom 3", "boom 5"]);
    expect(warn).toHaveBeenCalledTimes(3);
    expect(warn.mock.calls[0]![0]).toMatchObject({ loop: "poll", consecutive: 1 });
    await loop.stop();
  });

  it("adds up to jitter × period to each wait", async () => {
    let runs = 0;
    const loop = until(async () => void runs++, { name: "t", periodMs: 100, jitter: 0.5, random: () => 1 });
    await vi.advanceTimersByTimeAsync(149);
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(1);
    await loop.stop();
  });

  it("never overlaps a slow f: the period counts from the end of a run", async () => {
    let active = 0;
    let maxActive = 0;
    const gates: Array<() => void> = [];
    const loop = until(
      async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        const d = deferred();
        gates.push(d.resolve);
        await d.promise;
        active--;
      },
      { name: "t", periodMs: 10, immediate: true },
    );
    await vi.advanceTimersByTimeAsync(100);
    expect(gates).toHaveLength(1);
    gates[0]!();
    await vi.advanceTimersByTimeAsync(9);
    expect(gates).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(gates).toHaveLength(2);
    expect(maxActive).toBe(1);
    gates[1]!();
    await loop.stop();
  });

  it("kick runs now; kicks during a run fold into one run right after it", async () => {
    let runs = 0;
    const gate = deferred();
    const loop = until(
      async () => {
        runs++;
        if (runs === 1) await gate.promise;
      },
      { name: "t", periodMs: 1000 },
    );
    loop.kick();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toBe(1);
    loop.kick();
    loop.kick();
    loop.kick();
    gate.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toBe(2);
    await vi.advanceTimersByTimeAsync(999);
    expect(runs).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toBe(3);
    await loop.stop();
  });

  it("stop waits for the run in flight, and nothing runs after it", async () => {
    let runs = 0;
    let finished = false;
    const gate = deferred();
    const loop = until(
      async () => {
        runs++;
        await gate.promise;
        finished = true;
      },
      { name: "t", periodMs: 10, immediate: true },
    );
    await vi.advanceTimersByTimeAsync(0);
    const stopped = loop.stop();
    loop.kick();
    gate.resolve();
    await stopped;
    expect(finished).toBe(true);
    await vi.advanceTimersByTimeAsync(1000);
    expect(runs).toBe(1);
  });
});
