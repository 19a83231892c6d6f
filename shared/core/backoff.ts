/*
 * Exponential backoff, the one formula behind every retry that waits longer each time: a failed
 * config, a key that did not verify, a crashing HAProxy master, a broken watch.
 */

export interface Backoff {
  /** The wait before the first retry. */
  initialMs: number;
  /** No wait is longer. */
  maxMs: number;
}

/** The wait before retry number `retry` (1: the first): initialMs, doubling with each retry, at most maxMs. */
export function backoffDelay(backoff: Backoff, retry: number): number {
  return Math.min(backoff.initialMs * 2 ** (Math.max(retry, 1) - 1), backoff.maxMs);
}
