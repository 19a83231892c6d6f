/*
 * What one reconcile instance works with across its runs (full passes, app/pass.ts; head starts,
 * app/head-start.ts): the parts wired once by createReconciler, the state a warm instance carries
 * from one run to the next, the turns its renders and publishes take, and a run's deadline.
 */

import type { Logger } from "../adapters/log.js";
import type { ConfigRef, ObjectStore } from "../adapters/store.js";
import type { LiveView } from "../core/kubernetes/live-view.js";
import type { SettingsRecord } from "../core/settings/settings-record.js";
import { DeadlineError, raceAbort } from "../core/deadline.js";
import { envName } from "../core/settings/settings.js";
import type { GatewayStatusUpdater } from "./gateway-status.js";
import type { RolloutGates } from "./rollout-gates.js";
import type { AgentReports } from "./agent-reports.js";
import type { FunctionSettings } from "./function-options.js";
import type { LiveSnapshot, PassSteps } from "./pass-steps.js";
import type { PassRecorder } from "./pass-record.js";
import type { RenderContext } from "./render-context.js";

/** The parts every run uses, wired once per instance. */
export interface Instance {
  readonly log: Logger;
  readonly settings: FunctionSettings;
  readonly steps: PassSteps;
  readonly ctx: RenderContext;
  readonly reports: AgentReports;
  /** The canary rollout's gates (rollout-gates.ts), stepped by every pass after its publish. */
  readonly rollouts: RolloutGates;
  /** The Gateway API status writes behind each pass (gateway-status.ts). */
  readonly gatewayStatus: GatewayStatusUpdater;
  /** The newest config's layout, and pruning: the store's calls that are no step of a run. */
  readonly store: ObjectStore;
  /** The live cluster's revision by a fresh, cheap list (what a publish checks a regression with). */
  readonly liveRevision: (signal: AbortSignal) => Promise<string>;
  /** Recorded with each published config. */
  readonly generator: string;
  readonly recorded: SettingsRecord;
  /** The store's record of the last full pass (reconcile.json). */
  readonly recorder: PassRecorder;
  readonly turns: Turns;
  /** The next run's number (passes and head starts alike). */
  nextRun(): number;
}

/**
 * What a warm instance carries from one run to the next. Renders and publishes, which read and
 * write it, take turns (Turns); a head start's early checks read it outside its turn and look
 * again once it has one.
 */
export interface WarmState {
  /** The last full list, with the objects head starts read since (core/kubernetes/live-view.ts). */
  readonly view: LiveView<LiveSnapshot>;
  /**
   * The Services the last render rendered; undefined on a cold instance, which holds nothing back
   * (it cannot tell a new Service from one the newest config already serves).
   */
  renderedServices: Set<string> | undefined;
  /**
   * The newest config in the store after this instance's last publish or pass. A head start builds
   * on the view only while that config is still the newest, i.e. while no other instance has
   * published over it; undefined when another one has.
   */
  newest: ConfigRef | undefined;
  /** A head start's publish left more configs than the store retains: the next pass prunes. */
  pruneDue: boolean;
}

/**
 * Renders and publishes run one at a time (head starts and full passes alike): each renders from
 * the view as the one before left it, with the render context's caches to itself, and publishes
 * in that order. Reads and lists run outside, so that a head start need not wait for a full list.
 */
export class Turns {
  private last: Promise<unknown> = Promise.resolve();

  take<T>(work: () => Promise<T>): Promise<T> {
    const run = this.last.then(work, work);
    this.last = run.catch(() => undefined);
    return run;
  }
}

/** A run's deadline (SERVICELB_PASS_TIMEOUT_MS): `guard` fails what outlasts it, naming the stage it reached. */
export interface RunDeadline {
  readonly signal: AbortSignal;
  guard<T>(work: Promise<T>): Promise<T>;
}

export function runDeadline(passTimeoutMs: number, stage: () => string): RunDeadline {
  const signal = AbortSignal.timeout(passTimeoutMs);
  return {
    signal,
    // The work itself is not stopped (the steps pass the signal on where they can); whatever it
    // does later is not awaited by anyone. A DeadlineError fails the pass, which the event source
    // retries, instead of one slow dependency holding the instance's pass slot.
    guard: (work) =>
      raceAbort(
        work,
        signal,
        () =>
          new DeadlineError(
            `the reconcile pass exceeded its deadline of ${passTimeoutMs} ms (${envName("passTimeoutMs")}) at ${stage()}; it was abandoned`,
          ),
      ),
  };
}
