import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DELIVERY_POLICIES, deliveryGate, parseDeliveryPolicy } from "../../../bench/delivery-policy.js";

describe("deliveryGate", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const clock = { now: () => Date.now() };

  it("servicelb's own policy delivers every event at once", () => {
    const got: number[] = [];
    const gate = deliveryGate<number>(DELIVERY_POLICIES.servicelb, (e) => got.push(e), clock);
    gate.offer(1);
    gate.offer(2);
    expect(got).toEqual([1, 2]);
  });

  it("haproxy-ingress: waits 200 ms, then at most one update every 2 s, each delivering the newest event of its burst", async () => {
    const got: Array<[number, number]> = [];
    const start = Date.now();
    const gate = deliveryGate<number>(
      DELIVERY_POLICIES["haproxy-ingress"],
      (e) => got.push([e, Date.now() - start]),
      clock,
    );
    gate.offer(1);
    await vi.advanceTimersByTimeAsync(199);
    expect(got).toEqual([]);
    gate.offer(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(got).toEqual([[2, 200]]);
    // The next change 300 ms later waits for the 2 s since the last update, not just 200 ms.
    await vi.advanceTimersByTimeAsync(300);
    gate.offer(3);
    await vi.advanceTimersByTimeAsync(1699);
    expect(got).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(got).toEqual([
      [2, 200],
      [3, 2200],
    ]);
    // A change long after the last update waits only the 200 ms.
    await vi.advanceTimersByTimeAsync(5000);
    gate.offer(4);
    await vi.advanceTimersByTimeAsync(200);
    expect(got.at(-1)).toEqual([4, 7400]);
    gate.stop();
  });

  it("haproxytech: delivers on a 5 s period, only when something changed", async () => {
    const got: Array<[number, number]> = [];
    const start = Date.now();
    const gate = deliveryGate<number>(DELIVERY_POLICIES.haproxytech, (e) => got.push([e, Date.now() - start]), clock);
    await vi.advanceTimersByTimeAsync(1000);
    gate.offer(1);
    gate.offer(2);
    await vi.advanceTimersByTimeAsync(3999);
    expect(got).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(got).toEqual([[2, 5000]]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(got).toHaveLength(1);
    gate.stop();
    gate.offer(3);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(got).toHaveLength(1);
  });

  it("names the policies it knows", () => {
    expect(parseDeliveryPolicy("haproxytech")).toEqual({ name: "haproxytech", periodMs: 5000 });
    expect(() => parseDeliveryPolicy("nginx")).toThrow(
      /unknown delivery policy "nginx": one of servicelb, haproxy-ingress, haproxytech/,
    );
  });
});
