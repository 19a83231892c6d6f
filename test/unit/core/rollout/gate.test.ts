import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BackendCounters,
  DEFAULT_THRESHOLDS,
  evaluateGate,
  sumCounters,
} from "../../../../shared/core/rollout/gate.js";

const side = (entries: Record<string, BackendCounters>) => new Map(Object.entries(entries));
const ok = (requests: number, rtimeMs = 10): BackendCounters => ({ requests, errors: 0, rtimeMs });

describe("evaluateGate", () => {
  it("passes a canary as good as its control", () => {
    const r = evaluateGate(
      side({ web: ok(500), api: ok(300) }),
      side({ web: ok(1000), api: ok(600) }),
      DEFAULT_THRESHOLDS,
    );
    expect(r.verdict).toBe("pass");
  });

  it("fails on the one broken backend among many, and names it with its figures", () => {
    const canary = side({ web: ok(5000), api: ok(3000), shop: { requests: 200, errors: 200, rtimeMs: 1 } });
    const control = side({ web: ok(10000), api: ok(6000), shop: ok(400) });
    const r = evaluateGate(canary, control, DEFAULT_THRESHOLDS);
    expect(r.verdict).toBe("fail");
    expect(r.reason).toMatch(/^shop: 5xx rate 100\.00% on the canary against 0\.00% on the control/);
    expect(r.backends[0]).toMatchObject({ backend: "shop", verdict: "fail", canary: { requests: 200, errors: 200 } });
  });

  it("allows half a percentage point over the control's 5xx rate, not more", () => {
    const control = side({ web: { requests: 1000, errors: 10, rtimeMs: 10 } });
    expect(
      evaluateGate(side({ web: { requests: 1000, errors: 15, rtimeMs: 10 } }), control, DEFAULT_THRESHOLDS).verdict,
    ).toBe("pass");
    expect(
      evaluateGate(side({ web: { requests: 1000, errors: 16, rtimeMs: 10 } }), control, DEFAULT_THRESHOLDS).verdict,
    ).toBe("fail");
  });

  it("fails a canary over 1.2 times the control's response time (and 5 ms over it)", () => {
    const control = side({ web: ok(1000, 100) });
    expect(evaluateGate(side({ web: ok(1000, 120) }), control, DEFAULT_THRESHOLDS).verdict).toBe("pass");
    const slow = evaluateGate(side({ web: ok(1000, 121) }), control, DEFAULT_THRESHOLDS);
    expect(slow.verdict).toBe("fail");
    expect(slow.reason).toMatch(/response time 121\.0 ms on the canary against 100\.0 ms/);
    // 1 ms against 0 ms is noise at rtime's resolution.
    expect(evaluateGate(side({ web: ok(1000, 1) }), side({ web: ok(1000, 0) }), DEFAULT_THRESHOLDS).verdict).toBe(
      "pass",
    );
  });

  it("fails on all backends together when none has the requests alone, naming the one the errors come from", () => {
    const canary = side({ web: ok(15), shop: { requests: 15, errors: 15, rtimeMs: 0 } });
    const r = evaluateGate(canary, side({}), { ...DEFAULT_THRESHOLDS, minRequests: 20 });
    expect(r.verdict).toBe("fail");
    expect(r.reason).toBe(
      "all backends: 5xx rate 50.00% on the canary against 0.00% on no control traffic (at most +0.50%); most from shop (15 of 15)",
    );
  });

  it("waits below the minimum of requests, and judges the canary alone against no 5xx without control traffic", () => {
    expect(evaluateGate(side({ web: ok(99) }), side({}), DEFAULT_THRESHOLDS)).toMatchObject({
      verdict: "wait",
      reason: "99 canary requests, fewer than the 100 needed to judge",
    });
    expect(evaluateGate(side({ web: ok(100) }), side({}), DEFAULT_THRESHOLDS).verdict).toBe("pass");
    expect(
      evaluateGate(side({ web: { requests: 100, errors: 1, rtimeMs: 5 } }), side({}), DEFAULT_THRESHOLDS).verdict,
    ).toBe("fail");
  });

  it("never passes more canary 5xx where fewer failed (monotone in the canary's errors)", () => {
    const counters = fc.record({
      requests: fc.integer({ min: 0, max: 5000 }),
      errors: fc.integer({ min: 0, max: 5000 }),
      rtimeMs: fc.option(fc.integer({ min: 0, max: 1000 }), { nil: null }),
    });
    fc.assert(
      fc.property(counters, counters, fc.integer({ min: 0, max: 500 }), (canary, control, more) => {
        const base = evaluateGate(side({ b: canary }), side({ b: control }), DEFAULT_THRESHOLDS);
        const worse = evaluateGate(
          side({ b: { ...canary, errors: canary.errors + more } }),
          side({ b: control }),
          DEFAULT_THRESHOLDS,
        );
        if (base.verdict === "fail") expect(worse.verdict).toBe("fail");
      }),
    );
  });
});

describe("sumCounters", () => {
  it("adds nodes per backend, response times weighted by requests", () => {
    const sums = sumCounters([
      { web: { requests: 100, errors: 1, rtimeMs: 10 } },
      { web: { requests: 300, errors: 2, rtimeMs: 30 } },
    ]);
    expect(sums.get("web")).toEqual({ requests: 400, errors: 3, rtimeMs: 25 });
  });
});
