/*
 * How the agent takes a new config, decided from what runs and what arrived, both parsed
 * (core/haproxy-config/parse.ts). Pure: the apply steps do what this says and log the reason (as
 * haproxytech's ReloadIf(cond, reason) does).
 */

import { diffConfigs } from "../core/haproxy-config/diff.js";
import type { HaproxyConfig, ParsedConfig } from "../core/haproxy-config/parse.js";
import { diffPatternFiles, type PatternFile } from "../core/haproxy-config/pattern-files.js";
import { planRuntime, type RuntimeCommand } from "../core/haproxy-config/runtime-plan.js";
import { swapOrder } from "../core/haproxy-config/swap-order.js";

export type ApplyDecision =
  /** The bytes HAProxy runs: nothing to apply. */
  | { kind: "identical" }
  /**
   * Only server slots and the lines of pattern files and route maps changed, or a backend gained
   * server slots it can add at runtime (a Service added into a spare backend is such a change):
   * these slot commands, in make-before-break order, then these files swapped whole (each
   * atomically, in swapOrder's order), then the `emptying` commands, on `socket`. Slots first, so
   * a new Service's endpoints are ready before its routes point at them; a backend left with no
   * ready server last, so that the routes and maps that still name it (a route removed, a spare
   * freed) point elsewhere before it answers 503.
   */
  | {
      kind: "runtime";
      socket: string;
      commands: RuntimeCommand[];
      slots: number;
      files: PatternFile[];
      emptying: RuntimeCommand[];
    }
  | { kind: "reload"; reason: string };

export interface LiveConfig {
  /** The config HAProxy runs, runtime changes included. */
  config: ParsedConfig;
  /** HAProxy serves it and its slots are known to be what `config` says (no failed undo since). */
  known: boolean;
}

export function decideApply(live: LiveConfig | null, next: ParsedConfig): ApplyDecision {
  if (live === null) return { kind: "reload", reason: "HAProxy runs no config yet" };
  if (!live.known)
    return { kind: "reload", reason: "the live server slots are not known (undoing runtime changes failed)" };
  const from = live.config;
  if (from.text === next.text) return { kind: "identical" };
  // The check refuses such a config; a reload is the path that runs it.
  if ("error" in next) return { kind: "reload", reason: `the new config's ${next.error}` };
  if ("error" in from) return { kind: "reload", reason: `the running config's ${from.error}` };
  return decideRuntime(from, next);
}

function decideRuntime(from: HaproxyConfig, to: HaproxyConfig): ApplyDecision {
  const socket = from.statsSocket;
  if (!socket) return { kind: "reload", reason: "the running config has no stats socket for the runtime API" };
  const files = diffPatternFiles(from.files, to.files);
  if (files.kind === "reload") return files;
  const diff = diffConfigs(from, to);
  if (diff.kind === "reload") return diff;
  // An identical head: only the files changed.
  const { changes, adds, spare, emptied } =
    diff.kind === "runtime" ? diff : { changes: [], adds: [], spare: new Map(), emptied: new Set<string>() };
  const plan = planRuntime(changes, spare, adds);
  if (plan.kind === "reload") return plan;
  return {
    kind: "runtime",
    socket,
    commands: plan.commands.filter((c) => !emptied.has(c.backend)),
    slots: changes.length + adds.length,
    files: swapOrder(from.files, files.changed),
    emptying: plan.commands.filter((c) => emptied.has(c.backend)),
  };
}
