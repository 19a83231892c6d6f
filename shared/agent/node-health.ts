/*
 * Whether this node load-balances: the liveness and readiness of the agent's pod. It does when a
 * config is applied and the master it supervises answers its CLI with a worker. A store the agent
 * cannot pull from is not a reason to take the node out or restart it (that would turn a store
 * outage into a load-balancer outage): it is said in the answer and in /status.
 */
import { errorMessage } from "../core/error-message.js";
import type { ProcStatus } from "../adapters/haproxy/master.js";
import type { SupervisionStatus } from "../adapters/haproxy/restart-policy.js";
import type { Health } from "./http-api.js";
import type { PullLoopStatus } from "./node-state.js";
import type { PullHealth } from "./status-report.js";

export interface NodeHealthParts {
  applier: { readonly serving: boolean; status(): Pick<PullLoopStatus, "lastError"> };
  haproxy: { readonly running: boolean; readonly pid: number | undefined; supervision(): SupervisionStatus };
  /** A reload the agent ordered runs: the master re-executes and refuses its CLI; the old worker serves meanwhile. */
  reloading(): boolean;
  pull(): PullHealth;
  showProc(masterSocket: string, options: { timeoutMs: number }): Promise<ProcStatus>;
  masterSocket: string;
}

/** The health check of the agent's HTTP API. */
export function nodeHealth(parts: NodeHealthParts): () => Promise<Health> {
  return async () => {
    const h = await serving(parts);
    const pull = parts.pull();
    if (!h.ok || !pull.stale) return h;
    const since = pull.lastSuccessAt ? `since ${pull.lastSuccessAt}` : "since the agent started";
    return {
      ok: true,
      warning: `no pull from the store has completed ${since} (over ${pull.staleAfterSeconds} s); HAProxy serves the last applied config`,
    };
  };
}

async function serving({ applier, haproxy, reloading, showProc, masterSocket }: NodeHealthParts): Promise<Health> {
  if (!applier.serving) {
    const err = applier.status().lastError;
    return { ok: false, reason: `no config applied yet${err ? ` (last error: ${err.message})` : ""}` };
  }
  if (!haproxy.running) {
    const next = haproxy.supervision().pendingRestart;
    const when =
      next && next.delayMs > 0 ? ` at ${next.at} (${next.quickCrashes} quick crashes in a row: backing off)` : "";
    return { ok: false, reason: `HAProxy is not running; the agent restarts it${when}` };
  }
  // The reload itself is confirmed (or reported failed) by the applier within its timeout.
  if (reloading()) return { ok: true };
  try {
    const s = await showProc(masterSocket, { timeoutMs: 1000 });
    if (s.master.pid !== haproxy.pid)
      return { ok: false, reason: `the master socket is answered by another HAProxy (pid ${s.master.pid})` };
    if (s.workers.length === 0) return { ok: false, reason: "HAProxy has no worker" };
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: `HAProxy master does not answer: ${errorMessage(err)}` };
  }
}
