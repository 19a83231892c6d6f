/*
 * The overall deadline of one reconcile pass: one slow dependency (a store that drips bytes, an
 * API server that pages forever) fails the pass, which the event source retries, instead of
 * holding the instance's one pass slot and every event queued behind it.
 */

import { raceAbort } from "../core/race-abort.js";

export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
  /** The next delivery may find the dependency well again. */
  readonly transient = true;
}

/**
 * `work`, or a DeadlineError as soon as `signal` aborts. The work itself is not stopped (callers
 * pass the signal on where they can); whatever it does later is not awaited by anyone.
 */
export function withDeadline<T>(signal: AbortSignal, message: () => string, work: Promise<T>): Promise<T> {
  return raceAbort(work, signal, () => new DeadlineError(message()));
}
