import { describe, expect, it } from "vitest";
import { raceAbort } from "../../../shared/core/race-abort.js";

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
