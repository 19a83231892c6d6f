/*
 * How the agent takes a new config, decided from what runs and what arrived. Pure: the applier
 * does what this says and logs the reason (as haproxytech's ReloadIf(cond, reason) does).
 */

import { diffConfigs } from "../core/config-diff.js";
import { planRuntime, type RuntimeCommand } from "../core/runtime-plan.js";
import { statsSocketOf } from "./config-facts.js";

export type ApplyDecision =
  /** The bytes HAProxy runs: nothing to apply. */
  | { kind: "identical" }
  /** Only server slots changed: these commands, in make-before-break order, on `socket`. */
  | { kind: "runtime"; socket: string; commands: RuntimeCommand[]; slots: number }
  | { kind: "reload"; reason: string };

export interface LiveConfig {
  /** The config HAProxy runs, runtime changes included. */
  text: string;
  /** HAProxy serves it and its slots are known to be what `text` says (no failed undo since). */
  known: boolean;
}

export function decideApply(live: LiveConfig | null, next: string): ApplyDecision {
  if (live === null) return { kind: "reload", reason: "HAProxy runs no config yet" };
  if (!live.known)
    return { kind: "reload", reason: "the live server slots are not known (undoing runtime changes failed)" };
  if (live.text === next) return { kind: "identical" };
  const socket = statsSocketOf(live.text);
  if (!socket) return { kind: "reload", reason: "the running config has no stats socket for the runtime API" };
  const diff = diffConfigs(live.text, next);
  if (diff.kind !== "runtime") return diff;
  const plan = planRuntime(diff.changes, diff.spare);
  if (plan.kind === "reload") return plan;
  return { kind: "runtime", socket, commands: plan.commands, slots: diff.changes.length };
}
