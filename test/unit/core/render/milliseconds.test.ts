import { describe, expect, it } from "vitest";
import { msSince, roundMs } from "../../../../shared/core/render/milliseconds.js";

describe("durations as servicelb reports them", () => {
  it.each([
    [1.234, 1.23],
    [1.235001, 1.24],
    [0.004, 0],
    [1200, 1200],
  ])("rounds %f ms to %f", (ms, shown) => {
    expect(roundMs(ms)).toBe(shown);
  });

  it("measures from a performance.now() reading, to two decimals", () => {
    const ms = msSince(performance.now() - 5);
    expect(ms).toBeGreaterThanOrEqual(5);
    expect(roundMs(ms)).toBe(ms);
  });
});
