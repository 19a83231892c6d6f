import { describe, expect, it } from "vitest";
import { decideRestart, DEFAULT_RESTART_POLICY } from "../../../../shared/adapters/haproxy/restart-policy.js";

describe("decideRestart", () => {
  const policy = DEFAULT_RESTART_POLICY;

  it("restarts a master that had served stably at once, whatever came before", () => {
    expect(decideRestart(policy, 0, 60_000)).toEqual({ quick: false, quickCrashes: 0, delayMs: 0 });
    expect(decideRestart(policy, 7, policy.stableMs)).toEqual({ quick: false, quickCrashes: 0, delayMs: 0 });
  });

  it("restarts the first quick crash at once too, then doubles the delay up to the cap", () => {
    const delays: number[] = [];
    let streak = 0;
    for (const servedMs of [100, null, null, null, null, null, 2999]) {
      const d = decideRestart(policy, streak, servedMs);
      expect(d.quick).toBe(true);
      streak = d.quickCrashes;
      delays.push(d.delayMs);
    }
    expect(delays).toEqual([0, 500, 1000, 2000, 4000, 5000, 5000]);
    expect(streak).toBe(7);
  });

  it("honours a configured delay for good configs", () => {
    expect(decideRestart({ ...policy, delayMs: 3000 }, 0, 10_000).delayMs).toBe(3000);
    expect(decideRestart({ ...policy, delayMs: 3000 }, 0, null).delayMs).toBe(3000);
  });
});
