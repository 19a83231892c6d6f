/*
 * When to restart an HAProxy master that died on its own. Every second without a load balancer
 * costs every request to the node, so a master is restarted at once unless its config (or its
 * environment) is what keeps killing it; restarting that in a tight loop would only burn CPU and
 * flood the log, so from the second such crash in a row the delay doubles, up to a cap small
 * enough that the node is back within seconds once the cause is gone.
 *
 * What is held against the config: a master that dies before it serves (a config or environment
 * HAProxy cannot start on), and a master that dies while its config has not yet proven itself —
 * before any master served that config, since HAProxy was started or reloaded onto it, for
 * stableMs without a break. A config that did is known good: a master on it that dies later (an
 * OOM kill, a stray `kill -9`, however often) says nothing against it, and is restarted at once.
 * Measured before this rule (served time of the dead master alone): kills 0.5 s apart on a known
 * good config backed off 0.5 → 4 s, where kills 4 s apart recovered in 64–74 ms.
 *
 * Here too what a restart tells: its cause and delay to the agent's log (RestartInfo), the time
 * down once HAProxy serves again (Recovery), and the supervisor's record for /status.
 */

import { backoffDelay } from "../../core/backoff.js";

export interface RestartPolicy {
  /** Delay after a crash that is not held against the config, and after the first that is. */
  delayMs: number;
  /** A config one master served this long without a break is known good. */
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

/** What the supervisor knows of the config HAProxy runs, carried from one crash to the next. */
export interface RestartHistory {
  /** Quick crashes in a row. */
  quickCrashes: number;
  /** A master served the config stableMs without a break since HAProxy was started or reloaded onto it. */
  configKnownGood: boolean;
}

export interface RestartDecision extends RestartHistory {
  /** Held against the config: died before serving, or before its config was known good. */
  quick: boolean;
  delayMs: number;
}

/** `servedMs`: how long the dead master had served its config (since it served, or was reloaded onto it); null: it never served. */
export function decideRestart(policy: RestartPolicy, before: RestartHistory, servedMs: number | null): RestartDecision {
  const configKnownGood = before.configKnownGood || (servedMs !== null && servedMs >= policy.stableMs);
  const quick = servedMs === null || !configKnownGood;
  const quickCrashes = quick ? before.quickCrashes + 1 : 0;
  const delayMs =
    quickCrashes <= 1
      ? policy.delayMs
      : backoffDelay({ initialMs: policy.backoffInitialMs, maxMs: policy.backoffMaxMs }, quickCrashes - 1);
  return { quick, quickCrashes, configKnownGood, delayMs };
}

/** master-exited: the master died and is started again; worker-lost: its worker died under it and a reload forks a new one. */
export type RestartCause = "master-exited" | "worker-lost";

export interface RestartInfo {
  cause: RestartCause;
  /** e.g. "HAProxy master 1234 exited unexpectedly (signal SIGKILL) after serving 40.2 s; restarting now". */
  reason: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** How long the lost master (or worker's master) had served; null: it never served. */
  servedMs: number | null;
  /** Quick crashes in a row, this one included (see restart-policy.ts); 0 after a stable run. */
  quickCrashes: number;
  /** Wait before this restart. */
  delayMs: number;
}

export interface Recovery {
  cause: RestartCause;
  /** From the death of the master (or worker) to a new worker serving. */
  downMs: number;
}

/** What the supervisor has done, for /status. */
export interface SupervisionStatus {
  /** Masters restarted and workers replaced since the agent started. */
  restarts: number;
  lastRestart: (RestartInfo & { at: string }) | null;
  /** A restart waiting out its delay. */
  pendingRestart: { at: string; delayMs: number; quickCrashes: number } | null;
}
