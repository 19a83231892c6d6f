/*
 * When to restart an HAProxy master that died on its own. A crash of a master that had served
 * for a while says nothing against its config (OOM kill, a stray `kill -9`, a bug hit once):
 * every second without a load balancer costs every request to the node, so it is restarted at
 * once. A master that dies soon after it began serving, or before, again and again, is most
 * likely crashed by its config or its environment: restarting it in a tight loop would only
 * burn CPU and flood the log, so from the second such crash in a row the delay doubles, up to
 * a cap small enough that the node is back within seconds once the cause is gone.
 */

import { backoffDelay } from "../../core/backoff.js";

export interface RestartPolicy {
  /** Delay after a crash of a master that had served stably, and after the first quick crash. */
  delayMs: number;
  /** A master that served at least this long was stable: its crash is not held against its config. */
  stableMs: number;
  /** Delay after the second quick crash in a row; doubles with each further one. */
  backoffInitialMs: number;
  backoffMaxMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  delayMs: 0,
  stableMs: 3000,
  backoffInitialMs: 500,
  backoffMaxMs: 5000,
};

export interface RestartDecision {
  /** Died before serving, or within stableMs of starting to serve. */
  quick: boolean;
  /** Quick crashes in a row, this one included (0 after a stable run). */
  quickCrashes: number;
  delayMs: number;
}

/** `servedMs`: how long the dead master had served (null: it never served). */
export function decideRestart(
  policy: RestartPolicy,
  previousQuickCrashes: number,
  servedMs: number | null,
): RestartDecision {
  const quick = servedMs === null || servedMs < policy.stableMs;
  const quickCrashes = quick ? previousQuickCrashes + 1 : 0;
  const delayMs =
    quickCrashes <= 1
      ? policy.delayMs
      : backoffDelay({ initialMs: policy.backoffInitialMs, maxMs: policy.backoffMaxMs }, quickCrashes - 1);
  return { quick, quickCrashes, delayMs };
}
