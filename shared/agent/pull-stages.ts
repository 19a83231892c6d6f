/*
 * The stages a config passes on its way onto the node, each a call the pull loop (pull-loop.ts,
 * config-pull.ts) and its apply steps (apply-steps.ts) make through an object that the composition
 * root may wrap — the benches' stage trace does (app/agent-trace.ts) — so that neither knows what
 * wraps it. The objects they build themselves do the work.
 */

import type { ReloadResult } from "../adapters/haproxy/master.js";
import type { StoredConfig } from "../adapters/store.js";
import type { ApplyDecision } from "./decide.js";
import type { AgentError, AppliedConfig } from "./node-state.js";

/**
 * What a step tells the pull loop: `dropped` when a reload onto the file dropped runtime changes
 * newer than it (the newest config must be pulled again), else `done` (the outcome itself is
 * recorded in NodeState).
 */
export type StepOutcome = "done" | "dropped";

/** How a pull found the config it takes: a ping's key, a listing, a pin or rollout.json. */
export type PullVia = "ping" | "list" | "pin" | "rollout";

export interface PullStages {
  /** A ping named `key`: pulling, unless that config (or a newer one) runs already. */
  notify(key: string, sha256?: string): "pulling" | "current";
  /** Whether a pull runs now: a ping then folds into the next. */
  busy(): boolean;
  /** The key of the config that runs, if known. */
  running(): string | null;
  /** One pull: reads the store, and takes what it names. */
  pull(): Promise<StepOutcome>;
  /**
   * A config a pull found: applied unless it is older than the one that runs (or not the pinned
   * one): then `stale`. `runningDistrusted`: the store no longer trusts the running key.
   */
  take(config: StoredConfig, via: PullVia, runningDistrusted?: boolean): Promise<StepOutcome | "stale">;
}

export interface ApplyStages {
  /** `haproxy -c` on the config and, meanwhile, the server states a reload will carry over. */
  check(config: StoredConfig): Promise<{ ok: boolean; serverState: string | null }>;
  /** A runtime change's slot commands and pattern file swaps; throws when one fails. */
  runtime(config: StoredConfig, decision: Extract<ApplyDecision, { kind: "runtime" }>): Promise<void>;
  /** HAProxy's first start, on the file that holds `key`. */
  start(key: string): Promise<void>;
  /** A reload onto the file that holds `key`; `undo`: to put back the file's config after runtime changes. */
  reload(key: string | null, why?: "undo"): Promise<Pick<ReloadResult, "ok" | "reason">>;
  /** A config runs: recorded as applied (`lastError`: an error that still stands). */
  applied(
    config: Omit<StoredConfig, "key" | "revision"> & { key: string | null; revision: string | null },
    how: AppliedConfig["how"],
    t0: number,
    lastError?: AgentError | null,
  ): Promise<void>;
}

/** What a composition root wraps around the stages; each returns the stages it was given, or a wrapper. */
export interface StageDecorators {
  pull?: (stages: PullStages) => PullStages;
  apply?: (stages: ApplyStages) => ApplyStages;
}
