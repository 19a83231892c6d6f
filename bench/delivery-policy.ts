import type { Gate } from "../shared/dev/event-bridge.js";

/**
 * When the event bridge hands cluster changes to the reconcile function. servicelb's own policy
 * is to deliver every event at once: the function coalesces bursts itself (one pass at a time,
 * events during a pass share one follow-up pass), so any wait in front of it only adds latency.
 *
 * The other policies reproduce the published update policies of two peer controllers, so that
 * bench/e2e can put them side by side through the same pipeline. Events are hints (every pass
 * re-lists), so a held-back burst is delivered as its newest event: one pass, as the peers make
 * one update for it.
 * - haproxy-ingress (jcmoraisjr/haproxy-ingress): `--wait-before-update` 200 ms, then
 *   `--rate-limit-update` 0.5, i.e. at most one update every 2 s.
 * - haproxytech/kubernetes-ingress: `--sync-period` 5 s, config changes applied on that period.
 */
export type DeliveryPolicy =
  | { name: "servicelb" }
  | { name: "haproxy-ingress"; waitMs: number; minIntervalMs: number }
  | { name: "haproxytech"; periodMs: number };

export const DELIVERY_POLICIES: Record<DeliveryPolicy["name"], DeliveryPolicy> = {
  servicelb: { name: "servicelb" },
  "haproxy-ingress": { name: "haproxy-ingress", waitMs: 200, minIntervalMs: 2000 },
  haproxytech: { name: "haproxytech", periodMs: 5000 },
};

export function parseDeliveryPolicy(text: string): DeliveryPolicy {
  const policy = (DELIVERY_POLICIES as Record<string, DeliveryPolicy | undefined>)[text];
  if (!policy)
    throw new Error(
      `unknown delivery policy ${JSON.stringify(text)}: one of ${Object.keys(DELIVERY_POLICIES).join(", ")}`,
    );
  return policy;
}

/** Applies `policy` in front of `deliver`. Timers come from `clock` (tests use fake timers). */
export function deliveryGate<T>(
  policy: DeliveryPolicy,
  deliver: (event: T) => void,
  clock: { now(): number } = performance,
): Gate<T> {
  if (policy.name === "servicelb") return { offer: deliver, stop: () => undefined };
  let pending: { event: T } | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    if (!pending) return;
    const { event } = pending;
    pending = undefined;
    deliver(event);
  };
  if (policy.name === "haproxytech") {
    const ticker = setInterval(() => {
      if (pending) flush();
    }, policy.periodMs);
    return {
      offer: (event) => {
        pending = { event };
      },
      stop: () => clearInterval(ticker),
    };
  }
  // haproxy-ingress: an update waits waitMs after the change that asked for it, and never comes
  // sooner than minIntervalMs after the previous update.
  let lastUpdate = -Infinity;
  return {
    offer(event) {
      pending = { event };
      if (timer) return;
      const due = Math.max(clock.now() + policy.waitMs, lastUpdate + policy.minIntervalMs);
      timer = setTimeout(() => {
        lastUpdate = clock.now();
        flush();
      }, due - clock.now());
    },
    stop: () => clearTimeout(timer),
  };
}
