import { describe, expect, it } from "vitest";
import { eachAtMost } from "../../../shared/core/at-most.js";

describe("eachAtMost", () => {
  it("works on every item once, in order of start, never more than the limit at a time", async () => {
    const started: number[] = [];
    let inFlight = 0;
    let most = 0;
    await eachAtMost([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      started.push(n);
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, n % 3));
      inFlight--;
    });
    expect(started).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(most).toBe(3);
  });

  it("starts no worker for no items, and rejects with the first failure", async () => {
    await eachAtMost([], 4, () => Promise.reject(new Error("never called")));
    await expect(
      eachAtMost([1, 2], 2, async (n) => {
        if (n === 2) throw new Error("item 2 failed");
      }),
    ).rejects.toThrow("item 2 failed");
  });
});
