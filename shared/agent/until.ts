/*
 * Kubernetes' `wait.JitterUntil` for the agent's loops (poll, status report): run f every period
 * until stopped; a failing f is logged and counted, and the loop keeps going. The period counts
 * from the end of a run, so a slow f never overlaps itself.
 */

import type { Logger } from "../adapters/log.js";

export interface UntilOptions {
  name: string;
  periodMs: number;
  /** Each wait is periodMs × (1 + jitter × random()): a fleet started together does not poll in step. */
  jitter?: number;
  /** Run at once, then every period (default: wait one period first). */
  immediate?: boolean;
  log?: Logger;
  onFailure?: (err: unknown) => void;
  random?: () => number;
}

export interface Loop {
  /** Run now instead of at the next tick; during a run, run once more right after it. */
  kick(): void;
  /** No more runs; resolves once a run in flight has finished. */
  stop(): Promise<void>;
  readonly failures: number;
}

export function until(f: () => Promise<void>, options: UntilOptions): Loop {
  const { name, periodMs, jitter = 0, log, onFailure, random = Math.random } = options;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  let failures = 0;
  let consecutive = 0;

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(run, periodMs * (1 + jitter * random()));
  };

  function run(): void {
    clearTimeout(timer);
    timer = undefined;
    if (stopped) return;
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = (async () => {
      try {
        await f();
        consecutive = 0;
      } catch (err) {
        failures++;
        consecutive++;
        log?.warn({ loop: name, err, consecutive }, `${name} failed; trying again at the next tick`);
        onFailure?.(err);
      }
    })().finally(() => {
      inFlight = undefined;
      if (again) {
        again = false;
        run();
      } else schedule();
    });
  }

  if (options.immediate) run();
  else schedule();

  return {
    kick: run,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      while (inFlight) await inFlight;
    },
    get failures() {
      return failures;
    },
  };
}
