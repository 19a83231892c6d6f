import { afterEach, describe, expect, it, vi } from "vitest";
import { DeadlineError, raceAbort, settlesWithin, timeoutSignal, withTimeout } from "../../../shared/core/deadline.js";

const never = new Promise<never>(() => undefined);

describe("raceAbort", () => {
  it("gives the work's value when it settles first", async () => {
    expect(await raceAbort(Promise.resolve(7), new AbortController().signal, () => new Error("late"))).toBe(7);
    await expect(
      raceAbort(Promise.reject(new Error("failed")), new AbortController().signal, () => new Error("late")),
    ).rejects.toThrow("failed");
  });

  it("rejects with the reason as soon as the signal aborts, whatever the work does", async () => {
    const ac = new AbortController();
    const raced = raceAbort(never, ac.signal, () => new Error("deadline"));
    ac.abort();
    await expect(raced).rejects.toThrow("deadline");
  });

  it("rejects at once on an aborted signal, and leaves the work's later failure handled", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    try {
      let fail: (err: Error) => void = () => undefined;
      const work = new Promise<never>((_, reject) => {
        fail = reject;
      });
      await expect(raceAbort(work, AbortSignal.abort(), () => new Error("deadline"))).rejects.toThrow("deadline");
      fail(new Error("later"));
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});

describe("timeoutSignal", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("aborts with a TimeoutError once the time has passed, on the clock fake timers hold", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const signal = timeoutSignal(1000);
    vi.advanceTimersByTime(999);
    expect(signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe("TimeoutError");
  });
});

describe("withTimeout", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("gives the work's value when it comes in time, and leaves no timer behind", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    await expect(withTimeout(Promise.resolve("ok"), 1000, () => "late")).resolves.toBe("ok");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("rejects with a transient DeadlineError saying the message once the time has passed", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const raced = withTimeout(never, 1000, () => "no answer within 1000 ms");
    const settled = raced.catch((err: unknown) => err);
    vi.advanceTimersByTime(1000);
    const err = await settled;
    expect(err).toBeInstanceOf(DeadlineError);
    expect(err).toMatchObject({ message: "no answer within 1000 ms", transient: true });
  });
});

describe("settlesWithin", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is true when the work settles in time, a failure too, and leaves no timer behind", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    await expect(settlesWithin(Promise.resolve(), 1000)).resolves.toBe(true);
    await expect(settlesWithin(Promise.reject(new Error("exited badly")), 1000)).resolves.toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("is false once the time has passed without the work settling", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const settled = settlesWithin(never, 1000);
    vi.advanceTimersByTime(1000);
    await expect(settled).resolves.toBe(false);
  });
});
