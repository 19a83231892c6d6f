/*
 * The canary rollout's record, `rollout.json` (docs/design.md#canary-rollouts): its schema, the
 * record a fleet starts from, and what it says about one node — the wave that admits it and the
 * config it runs (rolloutTarget). The state machine that writes it is rollout.ts; agents and
 * `servicelb status` only read it.
 */

import { z } from "zod";

const configRefSchema = z.object({ key: z.string().min(1).max(1024), sha256: z.string().min(1).max(200) });
export type RolloutConfig = z.infer<typeof configRefSchema>;

const sideSchema = z.object({
  requests: z.number(),
  errors: z.number(),
  errorRate: z.number(),
  rtimeMs: z.number().nullable(),
});
const gateSchema = z.object({
  at: z.string(),
  verdict: z.enum(["pass", "fail", "wait"]),
  reason: z.string(),
  backends: z.array(
    z.object({
      backend: z.string(),
      canary: sideSchema,
      control: sideSchema,
      verdict: z.enum(["pass", "fail", "wait"]),
      reason: z.string(),
    }),
  ),
});
export type RecordedGate = z.infer<typeof gateSchema>;

const rolloutSchema = z.object({
  /** The candidate's key when the rollout started: names its gate windows. */
  id: z.string(),
  candidate: configRefSchema,
  /** rolling: waves advance on their gates; held: waiting for an operator (too little traffic, by the fallback); failed: every node is back on stable. */
  state: z.enum(["rolling", "held", "failed"]),
  /** Index of the wave baking now. */
  wave: z.number().int().min(0),
  /** Cumulative nodes admitted at each wave, fixed when the rollout started. */
  sizes: z.array(z.number().int().min(1)),
  /** Nodes in admission order, as known when the rollout started. */
  order: z.array(z.string()),
  startedAt: z.string(),
  waveStartedAt: z.string(),
  /** Why it is held or failed, in words. */
  reason: z.string().nullable(),
  gate: gateSchema.nullable(),
});
export type Rollout = z.infer<typeof rolloutSchema>;

const historySchema = z.object({
  key: z.string(),
  outcome: z.enum(["promoted", "rolled back", "aborted", "superseded"]),
  at: z.string(),
  reason: z.string(),
  gate: gateSchema.nullable(),
});
export type RolloutHistoryEntry = z.infer<typeof historySchema>;

export const rolloutRecordSchema = z.object({
  version: z.literal(1),
  /** The last good config: what every node outside the admitted waves runs. */
  stable: configRefSchema,
  rollout: rolloutSchema.nullable(),
  /** Configs that failed a gate or were aborted: their endpoint-only successors are not rolled out either. */
  rejected: z.array(configRefSchema),
  /** A structural config held back, and why (a failed rollout waiting for an operator, a rejected config). */
  blocked: z.object({ key: z.string(), reason: z.string() }).nullable(),
  history: z.array(historySchema),
  updatedAt: z.string(),
});
export type RolloutRecord = z.infer<typeof rolloutRecordSchema>;

export function windowOf(rollout: Pick<Rollout, "id" | "wave">): string {
  return `${rollout.id}#${rollout.wave}`;
}

/** The nodes that run the candidate: every wave up to the current one. */
export function admittedNodes(rollout: Rollout): string[] {
  if (rollout.state === "failed") return [];
  return rollout.order.slice(0, rollout.sizes[rollout.wave] ?? rollout.order.length);
}

/** The wave (1 for the canary's) that admits `node`, or null when the rollout's order does not name it. */
export function waveOfNode(rollout: Pick<Rollout, "order" | "sizes">, node: string): number | null {
  const at = rollout.order.indexOf(node);
  if (at < 0) return null;
  const wave = rollout.sizes.findIndex((admitted) => at < admitted);
  return wave < 0 ? null : wave + 1;
}

/** The config `node` runs under this record. */
export function rolloutTarget(record: RolloutRecord, node: string): RolloutConfig {
  const r = record.rollout;
  return r !== null && admittedNodes(r).includes(node) ? r.candidate : record.stable;
}

/** The record for a fleet that runs `newest` and has seen no rollout. */
export function initialRecord(newest: RolloutConfig, now: Date): RolloutRecord {
  return {
    version: 1,
    stable: newest,
    rollout: null,
    rejected: [],
    blocked: null,
    history: [],
    updatedAt: now.toISOString(),
  };
}
