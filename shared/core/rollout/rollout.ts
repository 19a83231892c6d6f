/*
 * The canary rollout's state machine (docs/design.md#canary-rollouts). Pure: the record kept in
 * `rollout.json`, what the fleet looks like now (the newest config, the nodes' reports) and the
 * settings in; the next record and what happened out. The reconcile function runs it on every
 * pass (app/rollout-gates.ts), so that all state lives in the record and an instance that replaces
 * another mid-rollout continues where it stopped; `servicelb rollout promote|abort` run its
 * operator steps.
 *
 * Every node runs exactly one config the record names (rolloutTarget, rollout-record.ts): the
 * rollout's candidate when the node is admitted, else `stable`, the last good config.
 */

import { z } from "zod";
import type { ChangeKind } from "./change-kind.js";
import { backendCountersSchema, evaluateGate, type GateResult, type GateThresholds, sumCounters } from "./gate.js";
import {
  admittedNodes,
  type RecordedGate,
  type Rollout,
  type RolloutConfig,
  type RolloutHistoryEntry,
  type RolloutRecord,
  windowOf,
} from "./rollout-record.js";
import { admissionOrder, type WaveSpec, waveSizes } from "./waves.js";

const KEPT_HISTORY = 20;
const KEPT_REJECTED = 10;

/** What one node reports that the rollout reads (agent/status-report.ts `traffic`). */
export const trafficReportSchema = z.object({
  /** The gate window the counters cover (`<rollout id>#<wave>`); null outside a rollout. */
  window: z.string().nullable(),
  /** The config the node ran when they were sampled. */
  key: z.string().nullable(),
  sampledAt: z.string(),
  backends: z.record(z.string(), backendCountersSchema),
});
export type TrafficReport = z.infer<typeof trafficReportSchema>;

export interface NodeView {
  node: string;
  /** The key it runs; null when none. */
  applied: string | null;
  /** Its last failure to pull, verify, check, apply or reload, with the key it concerned. */
  failure: { key: string | null; stage: string; message: string } | null;
  traffic: TrafficReport | null;
}

export interface RolloutSettings {
  waves: readonly WaveSpec[];
  bakeMs: number;
  /** How long a wave may wait for enough traffic to judge. */
  deadlineMs: number;
  /** What a wave that never saw enough traffic does at its deadline. */
  fallback: "promote" | "hold";
  /** How long an admitted node may take to run the candidate. */
  convergeMs: number;
  thresholds: GateThresholds;
}

export interface StepInput {
  newest: RolloutConfig;
  nodes: readonly NodeView[];
  now: Date;
  /** How two configs differ; only asked about keys the record or `newest` names. */
  classify: (from: string, to: string) => ChangeKind;
}

export interface StepResult {
  record: RolloutRecord;
  /** What happened, for the log: nothing when the record is unchanged but for its gate figures. */
  events: string[];
}

export function stepRollout(record: RolloutRecord, input: StepInput, settings: RolloutSettings): StepResult {
  const events: string[] = [];
  let r: RolloutRecord = structuredClone(record);
  const { newest, now, classify } = input;
  const at = now.toISOString();

  const current = r.rollout;
  if (current === null) {
    if (newest.key !== r.stable.key) {
      const kind = classify(r.stable.key, newest.key);
      if (kind !== "structural") {
        r.stable = newest;
        r.blocked = null;
        events.push(
          `${newest.key}: ${kind === "identical" ? "the same config" : "endpoints only"}, to every node at once`,
        );
      } else {
        const rejected = r.rejected.find((x) => x.key === newest.key || classify(x.key, newest.key) !== "structural");
        if (rejected) {
          const reason = `the rejected config ${rejected.key} with other endpoints: not rolled out`;
          if (r.blocked?.key !== newest.key) events.push(`${newest.key}: ${reason}`);
          r.blocked = { key: newest.key, reason };
        } else {
          r = start(r, newest, input.nodes, settings, at);
          events.push(`${newest.key}: structural change, rollout started`);
        }
      }
    }
  } else if (newest.key !== current.candidate.key) {
    const kind = classify(current.candidate.key, newest.key);
    const back = newest.key === r.stable.key || classify(r.stable.key, newest.key) !== "structural";
    if (back) {
      // The cluster went back to the stable structure (the bad annotation reverted): safe everywhere at once.
      if (current.state !== "failed")
        r.history = keep([
          ...r.history,
          entry(current, "superseded", at, `superseded by ${newest.key}, the stable structure`),
        ]);
      r = { ...r, stable: newest, rollout: null, blocked: null };
      events.push(
        `${newest.key}: the stable config's structure, to every node at once; the rollout of ${current.candidate.key} ends`,
      );
    } else if (current.state === "failed") {
      const reason = `rollout of ${current.candidate.key} failed: structural publishes are held until \`servicelb rollout promote\` or \`abort\``;
      if (r.blocked?.key !== newest.key) events.push(`${newest.key}: held (${reason})`);
      r.blocked = { key: newest.key, reason };
    } else if (kind !== "structural") {
      r.rollout = { ...current, candidate: newest };
      events.push(`${newest.key}: endpoints only, to the admitted nodes at once`);
    } else {
      r.history = keep([...r.history, entry(current, "superseded", at, `superseded by ${newest.key}`)]);
      r = start(r, newest, input.nodes, settings, at);
      events.push(`${newest.key}: structural change, rollout restarted from the first wave`);
    }
  }

  if (r.rollout?.state === "rolling" && r.rollout.order.length === 0 && input.nodes.length > 0) {
    const { startedAt, candidate } = r.rollout;
    r = start(r, candidate, input.nodes, settings, at);
    r.rollout = { ...r.rollout!, startedAt };
    events.push(
      `${candidate.key}: nodes report now: the rollout's waves are made of ${r.rollout.order.length} of them`,
    );
  }
  if (r.rollout?.state === "rolling") {
    const step = judgeWave(r.rollout, input, settings);
    r.rollout = { ...r.rollout, gate: step.gate };
    if (step.outcome === "fail") {
      r = fail(r, step.reason, at);
      events.push(`rollout of ${record.rollout?.candidate.key ?? newest.key} failed: ${step.reason}`);
    } else if (step.outcome === "advance") {
      const { record: advanced, event } = advance(r, at, step.reason);
      r = advanced;
      events.push(event);
    } else if (step.outcome === "hold") {
      r.rollout = { ...r.rollout, state: "held", reason: step.reason };
      events.push(`rollout held: ${step.reason}`);
    }
  }
  if (events.length > 0 || JSON.stringify(r) !== JSON.stringify(record)) r.updatedAt = at;
  return { record: r, events };
}

/** `servicelb rollout promote`: the next wave now (or, after a failure, the candidate everywhere). */
export function promoteRollout(record: RolloutRecord, now: Date): StepResult {
  const at = now.toISOString();
  const rollout = record.rollout;
  if (rollout === null) throw new Error("no rollout to promote");
  let r = structuredClone(record);
  if (rollout.state === "failed") {
    r.stable = rollout.candidate;
    r.rejected = r.rejected.filter((x) => x.key !== rollout.candidate.key);
    r.history = keep([...r.history, entry(rollout, "promoted", at, "promoted by an operator after its gate failed")]);
    r.rollout = null;
    r.blocked = null;
    r.updatedAt = at;
    return { record: r, events: [`${rollout.candidate.key}: promoted to every node by an operator`] };
  }
  r.rollout = { ...rollout, state: "rolling", reason: null };
  const { record: advanced, event } = advance(r, at, "promoted by an operator");
  r = advanced;
  r.updatedAt = at;
  return { record: r, events: [event] };
}

/** `servicelb rollout abort`: every node back on stable, the candidate rejected; a failed rollout is closed. */
export function abortRollout(record: RolloutRecord, now: Date): StepResult {
  const at = now.toISOString();
  const rollout = record.rollout;
  if (rollout === null) throw new Error("no rollout to abort");
  const r = structuredClone(record);
  if (rollout.state !== "failed") {
    r.rejected = keepRejected([...r.rejected, rollout.candidate]);
    r.history = keep([...r.history, entry(rollout, "aborted", at, "aborted by an operator")]);
  }
  r.rollout = null;
  r.blocked = null;
  r.updatedAt = at;
  return {
    record: r,
    events: [
      rollout.state === "failed"
        ? `rollout of ${rollout.candidate.key} closed by an operator: new structural configs roll out again`
        : `rollout of ${rollout.candidate.key} aborted by an operator: every node back on ${r.stable.key}`,
    ],
  };
}

function start(
  r: RolloutRecord,
  candidate: RolloutConfig,
  nodes: readonly NodeView[],
  settings: RolloutSettings,
  at: string,
): RolloutRecord {
  const order = admissionOrder(nodes.map((n) => n.node));
  return {
    ...r,
    blocked: null,
    rollout: {
      id: candidate.key,
      candidate,
      state: "rolling",
      wave: 0,
      sizes: waveSizes(settings.waves, order.length),
      order,
      startedAt: at,
      waveStartedAt: at,
      reason: null,
      gate: null,
    },
  };
}

type WaveStep =
  | { outcome: "wait"; gate: RecordedGate | null }
  | { outcome: "advance" | "fail" | "hold"; reason: string; gate: RecordedGate | null };

function judgeWave(rollout: Rollout, input: StepInput, settings: RolloutSettings): WaveStep {
  const { now, nodes } = input;
  const elapsed = now.getTime() - Date.parse(rollout.waveStartedAt);
  const admitted = new Set(admittedNodes(rollout));
  // No node reports yet: nothing to judge, and nothing goes everywhere unseen. stepRollout makes
  // the waves once nodes report; until the deadline this waits, then the fallback decides.
  if (rollout.sizes.length === 0) {
    if (elapsed < settings.deadlineMs) return { outcome: "wait", gate: null };
    return byFallback(`no node reported by the deadline (${Math.round(settings.deadlineMs / 1000)} s)`, null, settings);
  }
  for (const n of nodes) {
    if (!admitted.has(n.node)) continue;
    if (n.failure !== null && n.failure.key === rollout.candidate.key && n.failure.stage !== "pull")
      return {
        outcome: "fail",
        reason: `node ${n.node} could not run ${n.failure.key} (${n.failure.stage}: ${n.failure.message})`,
        gate: rollout.gate,
      };
  }
  const behind = [...admitted].filter((node) => nodes.find((n) => n.node === node)?.applied !== rollout.candidate.key);
  if (behind.length > 0 && elapsed >= settings.convergeMs)
    return {
      outcome: "fail",
      reason: `node ${behind[0]} does not run ${rollout.candidate.key} ${Math.round(settings.convergeMs / 1000)} s after its wave started${behind.length > 1 ? ` (nor ${behind.length - 1} more)` : ""}`,
      gate: rollout.gate,
    };
  const window = windowOf(rollout);
  const inWindow = (n: NodeView) => n.traffic !== null && n.traffic.window === window;
  const canary = nodes.filter((n) => admitted.has(n.node) && inWindow(n) && n.traffic!.key === rollout.candidate.key);
  const control = nodes.filter((n) => !admitted.has(n.node) && inWindow(n));
  const result = evaluateGate(
    sumCounters(canary.map((n) => n.traffic!.backends)),
    sumCounters(control.map((n) => n.traffic!.backends)),
    settings.thresholds,
  );
  const gate = recorded(result, now);
  if (result.verdict === "fail") return { outcome: "fail", reason: result.reason, gate };
  if (elapsed < settings.bakeMs || behind.length > 0) return { outcome: "wait", gate };
  if (result.verdict === "pass") return { outcome: "advance", reason: result.reason, gate };
  if (elapsed < settings.deadlineMs) return { outcome: "wait", gate };
  return byFallback(
    `too little traffic to judge by the deadline (${Math.round(settings.deadlineMs / 1000)} s): ${result.reason}`,
    gate,
    settings,
  );
}

function byFallback(reason: string, gate: RecordedGate | null, settings: RolloutSettings): WaveStep {
  return settings.fallback === "promote"
    ? { outcome: "advance", reason: `${reason}; promoted by the fallback`, gate }
    : {
        outcome: "hold",
        reason: `${reason}; held by the fallback until \`servicelb rollout promote\` or \`abort\``,
        gate,
      };
}

function advance(r: RolloutRecord, at: string, reason: string): { record: RolloutRecord; event: string } {
  const rollout = r.rollout!;
  if (rollout.wave + 1 < rollout.sizes.length) {
    const next = { ...rollout, wave: rollout.wave + 1, waveStartedAt: at, gate: null };
    return {
      record: { ...r, rollout: next },
      event: `${rollout.candidate.key}: wave ${rollout.wave + 1} passed (${reason}); wave ${next.wave + 1} admits ${next.sizes[next.wave]} of ${next.order.length} nodes`,
    };
  }
  return {
    record: {
      ...r,
      stable: rollout.candidate,
      rollout: null,
      blocked: null,
      history: keep([...r.history, entry(rollout, "promoted", at, reason)]),
    },
    event: `${rollout.candidate.key}: every wave passed; stable on every node`,
  };
}

function fail(r: RolloutRecord, reason: string, at: string): RolloutRecord {
  const rollout = r.rollout!;
  const failed: Rollout = { ...rollout, state: "failed", reason };
  return {
    ...r,
    rollout: failed,
    rejected: keepRejected([...r.rejected, rollout.candidate]),
    history: keep([...r.history, entry(failed, "rolled back", at, reason)]),
  };
}

function entry(
  rollout: Rollout,
  outcome: RolloutHistoryEntry["outcome"],
  at: string,
  reason: string,
): RolloutHistoryEntry {
  return { key: rollout.candidate.key, outcome, at, reason, gate: rollout.gate };
}

function recorded(result: GateResult, now: Date): RecordedGate {
  return { at: now.toISOString(), ...result };
}

const keep = <T>(items: T[]): T[] => items.slice(-KEPT_HISTORY);
const keepRejected = (items: RolloutConfig[]): RolloutConfig[] =>
  items.filter((x, i) => items.findIndex((y) => y.key === x.key) === i).slice(-KEPT_REJECTED);
