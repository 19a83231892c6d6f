import { describe, expect, it } from "vitest";
import {
  decideRestart,
  DEFAULT_RESTART_POLICY,
  type RestartHistory,
} from "../../../../shared/adapters/haproxy/restart-policy.js";

describe("decideRestart", () => {
  const policy = DEFAULT_RESTART_POLICY;
  const fresh: RestartHistory = { quickCrashes: 0, configKnownGood: false };

  /** The delays of crashes in a row, each after serving its config this long (null: never served). */
  function delays(served: Array<number | null>, before = fresh): number[] {
    let history = before;
    return served.map((servedMs) => {
      const d = decideRestart(policy, history, servedMs);
      history = d;
      return d.delayMs;
    });
  }

  it("restarts a master that had served its config stably at once, whatever came before, and knows the config good", () => {
    expect(decideRestart(policy, fresh, 60_000)).toEqual({
      quick: false,
      quickCrashes: 0,
      configKnownGood: true,
      delayMs: 0,
    });
    expect(decideRestart(policy, { quickCrashes: 7, configKnownGood: false }, policy.stableMs)).toMatchObject({
      quick: false,
      quickCrashes: 0,
      delayMs: 0,
    });
  });

  it("restarts the first quick crash of a config not known good at once too, then doubles the delay up to the cap", () => {
    expect(delays([100, null, null, null, null, null, 2999])).toEqual([0, 500, 1000, 2000, 4000, 5000, 5000]);
  });

  it("never holds a master killed after serving against a config known good, however often (the issue's kills 0.5 s apart)", () => {
    expect(delays(Array(10).fill(500), { quickCrashes: 0, configKnownGood: true })).toEqual(Array(10).fill(0));
    // Proven by the first master, which served 3 s: the kills after it are not the config's doing.
    expect(delays([3500, 500, 500, 500, 500])).toEqual([0, 0, 0, 0, 0]);
  });

  it("holds masters that die before serving against the config even when it is known good: HAProxy cannot start on it", () => {
    expect(delays([500, null, null, null], { quickCrashes: 0, configKnownGood: true })).toEqual([0, 0, 500, 1000]);
  });

  it("honours a configured delay for good configs", () => {
    expect(decideRestart({ ...policy, delayMs: 3000 }, fresh, 10_000).delayMs).toBe(3000);
    expect(decideRestart({ ...policy, delayMs: 3000 }, fresh, null).delayMs).toBe(3000);
  });
});
