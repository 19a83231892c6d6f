/*
 * The counters a canary gate judges (docs/design.md#canary-rollouts), from the node's own
 * HAProxy: per backend, the requests (`req_tot`) and 5xx answers (`hrsp_5xx`) since the gate
 * window began, and the response time (`rtime`, HAProxy's average over the backend's last 1024
 * requests). The window is the rollout's wave (rollout.json, as the last pull read it): at its
 * start the counters are taken as a base and later samples report what was added since, so canary
 * and control nodes count the same stretch of time. A reload starts HAProxy's counters from zero:
 * a backend whose counters went down is counted from that zero.
 */

import type { StatRow } from "../adapters/haproxy/runtime.js";
import type { BackendCounters } from "../core/rollout/gate.js";
import type { TrafficReport } from "../core/rollout/rollout.js";

interface Raw {
  requests: number;
  errors: number;
  rtimeMs: number | null;
}

/** The backend rows of `show stat`, by backend. */
export function backendCounters(rows: readonly StatRow[]): Map<string, Raw> {
  const out = new Map<string, Raw>();
  for (const row of rows) {
    if (row.svname !== "BACKEND" || !row.pxname) continue;
    const requests = whole(row.req_tot);
    const rtime = row.rtime === undefined || row.rtime === "" ? null : whole(row.rtime);
    out.set(row.pxname, { requests, errors: whole(row.hrsp_5xx), rtimeMs: requests > 0 ? rtime : null });
  }
  return out;
}

const whole = (v: string | undefined) => {
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? Math.floor(n) : 0;
};

const ZERO: Raw = { requests: 0, errors: 0, rtimeMs: null };

export class TrafficSampler {
  private base: { window: string; counters: Map<string, Raw> } | null = null;
  private last: TrafficReport | null = null;

  /** Takes one sample of `rows` for `window` (null: no rollout, nothing is reported). */
  record(rows: readonly StatRow[], window: string | null, key: string | null, now = new Date()): void {
    if (window === null) {
      this.base = null;
      this.last = null;
      return;
    }
    const counters = backendCounters(rows);
    // A new window starts from what HAProxy has counted so far.
    if (this.base?.window !== window) this.base = { window, counters: new Map(counters) };
    const backends: Record<string, BackendCounters> = {};
    for (const [name, c] of counters) {
      let from = this.base.counters.get(name);
      // A backend new since the window began, or counters that went down (a reload): from zero.
      if (from === undefined || c.requests < from.requests || c.errors < from.errors) {
        from = ZERO;
        this.base.counters.set(name, from);
      }
      const requests = c.requests - from.requests;
      if (requests === 0) continue;
      backends[name] = { requests, errors: Math.max(0, c.errors - from.errors), rtimeMs: c.rtimeMs };
    }
    this.last = { window, key, sampledAt: now.toISOString(), backends };
  }

  report(): TrafficReport | null {
    return this.last;
  }
}
