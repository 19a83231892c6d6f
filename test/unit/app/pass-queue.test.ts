import { afterEach, describe, expect, it, vi } from "vitest";
import { Coalescer, Settled } from "../../../shared/app/pass-queue.js";

/** A run the test finishes by hand. */
function gate() {
  const calls: Array<{ input: number[]; finish: (ok: boolean) => void }> = [];
  const run = (input: number[]) =>
    new Promise<string>((resolve, reject) => {
      calls.push({ input, finish: (ok) => (ok ? resolve(input.join("+")) : reject(new Error(input.join("+")))) });
    });
  return { calls, run };
}
const tick = () => new Promise((r) => setTimeout(r, 0));

describe("Coalescer", () => {
  it("runs one at a time and folds the calls made meanwhile into one follow-up", async () => {
    const { calls, run } = gate();
    const queue = new Coalescer<number[], string>(run, (a, b) => [...a, ...b]);
    const first = queue.submit([1]);
    const later = [queue.submit([2]), queue.submit([3]), queue.submit([4])];
    expect(calls.map((c) => c.input)).toEqual([[1]]);
    expect(queue.busy).toBe(true);
    calls[0]!.finish(true);
    expect(await first).toBe("1");
    await tick();
    expect(calls.map((c) => c.input)).toEqual([[1], [2, 3, 4]]);
    calls[1]!.finish(true);
    expect(await Promise.all(later)).toEqual(["2+3+4", "2+3+4", "2+3+4"]);
    expect(queue.busy).toBe(false);
  });

  it("starts the follow-up after a run that failed, and idle() waits for both", async () => {
    const { calls, run } = gate();
    const queue = new Coalescer<number[], string>(run, (a, b) => [...a, ...b]);
    const first = queue.submit([1]).catch((err: Error) => `failed ${err.message}`);
    const second = queue.submit([2]);
    let idle = false;
    const waited = queue.idle().then(() => {
      idle = true;
    });
    calls[0]!.finish(false);
    expect(await first).toBe("failed 1");
    await tick();
    expect(idle).toBe(false);
    calls[1]!.finish(true);
    expect(await second).toBe("2");
    await waited;
    expect(idle).toBe(true);
  });
});

describe("Settled", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("starts one run after the calls stop, with the first call's input", async () => {
    vi.useFakeTimers();
    const run = vi.fn(async (input: string) => `ran ${input}`);
    const settled = new Settled<string, string>(200, 5, run);
    const a = settled.request("a");
    vi.advanceTimersByTime(150);
    const b = settled.request("b");
    vi.advanceTimersByTime(150);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(60);
    expect(await a).toBe("ran a");
    expect(await b).toBe("ran a");
    expect(run).toHaveBeenCalledTimes(1);
  });

  it("starts at most maxFactor delays after the first call, however long the calls go on", async () => {
    vi.useFakeTimers();
    const run = vi.fn(async () => "ran");
    const settled = new Settled<string, string>(200, 5, run);
    const first = settled.request("x");
    // A call every 100 ms would put a 200 ms wait off forever; the run starts 1,000 ms after the first.
    for (let t = 100; t < 1000; t += 100) {
      vi.advanceTimersByTime(100);
      void settled.request("x");
    }
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(100);
    expect(await first).toBe("ran");
    expect(run).toHaveBeenCalledTimes(1);
    // The next call waits anew.
    void settled.request("y");
    expect(run).toHaveBeenCalledTimes(1);
  });

  it("runs at once with no delay", async () => {
    const run = vi.fn(async (input: string) => input);
    expect(await new Settled<string, string>(0, 5, run).request("now")).toBe("now");
  });
});
