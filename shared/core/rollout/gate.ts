/*
 * The gate of a canary wave (docs/design.md#canary-rollouts): the traffic the canary nodes served
 * on the candidate config against what the control nodes served on the stable one over the same
 * wave, per backend (one broken Service among many fails the gate) and over all backends.
 *
 * The figures come from HAProxy's own counters (`show stat`): requests (`req_tot`), responses
 * with a 5xx status (`hrsp_5xx`, HAProxy's own 503s included) and the response time (`rtime`:
 * HAProxy 2.6 keeps the average over a backend's last 1024 requests, and no percentile, so the
 * average stands where Flagger uses a p99). Pure: figures in, verdict out.
 */

import { z } from "zod";

export const backendCountersSchema = z.object({
  requests: z.number().int().min(0),
  errors: z.number().int().min(0),
  /** Average response time in ms (HAProxy's rtime); null while the backend has answered nothing. */
  rtimeMs: z.number().min(0).nullable(),
});
export type BackendCounters = z.infer<typeof backendCountersSchema>;

export interface GateThresholds {
  /** Requests a side needs before its figures judge anything. */
  minRequests: number;
  /** The canary's 5xx rate may exceed the control's by this much (0.005: half a percentage point). */
  maxErrorRateIncrease: number;
  /** The canary's response time may be this many times the control's... */
  maxResponseTimeRatio: number;
  /** ...or this many ms above it, whichever is more: rtime is whole milliseconds. */
  responseTimeSlackMs: number;
}

export const DEFAULT_THRESHOLDS: GateThresholds = {
  minRequests: 100,
  maxErrorRateIncrease: 0.005,
  maxResponseTimeRatio: 1.2,
  responseTimeSlackMs: 5,
};

export type Verdict = "pass" | "fail" | "wait";

export interface SideFigures {
  requests: number;
  errors: number;
  /** errors / requests; 0 without requests. */
  errorRate: number;
  rtimeMs: number | null;
}

export interface BackendVerdict {
  /** A backend's name, or "*" for all of them. */
  backend: string;
  canary: SideFigures;
  control: SideFigures;
  verdict: Verdict;
  reason: string;
}

export interface GateResult {
  verdict: Verdict;
  reason: string;
  /** Failing backends first, then the aggregate, then the busiest others. */
  backends: BackendVerdict[];
}

/** The counters of many nodes, summed per backend (response times weighted by requests). */
export function sumCounters(nodes: Iterable<Readonly<Record<string, BackendCounters>>>): Map<string, BackendCounters> {
  const sums = new Map<string, { requests: number; errors: number; timed: number; weighted: number }>();
  for (const node of nodes)
    for (const [backend, c] of Object.entries(node)) {
      const s = sums.get(backend) ?? { requests: 0, errors: 0, timed: 0, weighted: 0 };
      s.requests += c.requests;
      s.errors += c.errors;
      if (c.rtimeMs !== null && c.requests > 0) {
        s.timed += c.requests;
        s.weighted += c.rtimeMs * c.requests;
      }
      sums.set(backend, s);
    }
  return new Map(
    [...sums].map(([b, s]) => [
      b,
      { requests: s.requests, errors: s.errors, rtimeMs: s.timed > 0 ? s.weighted / s.timed : null },
    ]),
  );
}

const MAX_LISTED = 12;

export function evaluateGate(
  canary: ReadonlyMap<string, BackendCounters>,
  control: ReadonlyMap<string, BackendCounters>,
  t: GateThresholds,
): GateResult {
  const judged: BackendVerdict[] = [];
  for (const [backend, c] of canary) judged.push(judge(backend, c, control.get(backend), t));
  const all = judge("*", collapse([...canary.values()]), collapse([...control.values()]), t);
  const failed = judged.filter((b) => b.verdict === "fail");
  const listed = [
    ...failed,
    all,
    ...judged.filter((b) => b.verdict !== "fail").sort((a, b) => b.canary.requests - a.canary.requests),
  ].slice(0, MAX_LISTED);
  if (failed.length > 0)
    return { verdict: "fail", reason: `${failed[0]!.backend}: ${failed[0]!.reason}`, backends: listed };
  if (all.verdict === "fail") {
    // No backend had the requests to judge alone: the one with the most canary 5xx is named.
    const source = judged.filter((b) => b.canary.errors > 0).sort((a, b) => b.canary.errors - a.canary.errors)[0];
    const from = source ? `; most from ${source.backend} (${source.canary.errors} of ${source.canary.requests})` : "";
    return { verdict: "fail", reason: `all backends: ${all.reason}${from}`, backends: listed };
  }
  if (all.verdict === "wait") return { verdict: "wait", reason: all.reason, backends: listed };
  return {
    verdict: "pass",
    reason: `${all.canary.requests} canary requests: 5xx and response times within bounds`,
    backends: listed,
  };
}

function collapse(counters: readonly BackendCounters[]): BackendCounters {
  let requests = 0;
  let errors = 0;
  let timed = 0;
  let weighted = 0;
  for (const c of counters) {
    requests += c.requests;
    errors += c.errors;
    if (c.rtimeMs !== null && c.requests > 0) {
      timed += c.requests;
      weighted += c.rtimeMs * c.requests;
    }
  }
  return { requests, errors, rtimeMs: timed > 0 ? weighted / timed : null };
}

function figures(c: BackendCounters | undefined): SideFigures {
  const requests = c?.requests ?? 0;
  const errors = Math.min(c?.errors ?? 0, requests);
  return { requests, errors, errorRate: requests > 0 ? errors / requests : 0, rtimeMs: c?.rtimeMs ?? null };
}

function judge(
  backend: string,
  canaryCounters: BackendCounters,
  controlCounters: BackendCounters | undefined,
  t: GateThresholds,
): BackendVerdict {
  const canary = figures(canaryCounters);
  const control = figures(controlCounters);
  const verdict = (v: Verdict, reason: string): BackendVerdict => ({ backend, canary, control, verdict: v, reason });
  if (canary.requests < t.minRequests)
    return verdict("wait", `${canary.requests} canary requests, fewer than the ${t.minRequests} needed to judge`);
  // Without enough control traffic the canary is held to a control that answered no 5xx.
  const controlKnown = control.requests >= t.minRequests;
  const baseRate = controlKnown ? control.errorRate : 0;
  if (canary.errorRate > baseRate + t.maxErrorRateIncrease)
    return verdict(
      "fail",
      `5xx rate ${percent(canary.errorRate)} on the canary against ${percent(baseRate)} on ${controlKnown ? "the control" : "no control traffic"} (at most +${percent(t.maxErrorRateIncrease)})`,
    );
  if (controlKnown && canary.rtimeMs !== null && control.rtimeMs !== null) {
    const bound = Math.max(control.rtimeMs * t.maxResponseTimeRatio, control.rtimeMs + t.responseTimeSlackMs);
    if (canary.rtimeMs > bound)
      return verdict(
        "fail",
        `response time ${ms(canary.rtimeMs)} on the canary against ${ms(control.rtimeMs)} on the control (at most ${ms(bound)})`,
      );
  }
  return verdict("pass", "within bounds");
}

const percent = (rate: number) => `${(rate * 100).toFixed(2)}%`;
const ms = (v: number) => `${v.toFixed(1)} ms`;
