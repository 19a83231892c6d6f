/*
 * Deadlines that hold even when the work ignores its signal (an SDK step, a list that pages on, a
 * store that drips bytes): the caller stops waiting, the work is left to end. One race for every
 * deadline: a reconcile pass's (app/warm-instance.ts), a store request's (adapters/store-limits.ts),
 * the Kubernetes reads' per request (adapters/cluster.ts), the agent's final status report, the
 * grace an HAProxy master is given to exit (adapters/haproxy/process.ts), a pass's wait for the
 * agents' reports (app/agent-reports.ts) and a store request the stopping agent abandons
 * (agent/store-watch.ts).
 */

/** What a deadline race rejects with when the caller gives no error of its own. */
export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
  /** The next try may find the dependency well again. */
  readonly transient = true;
}

/**
 * `work`, or the error `reason()` gives as soon as `signal` aborts, whichever comes first. The
 * work is not stopped; its later failure is handled here, so it is never an unhandled rejection.
 */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal, reason: () => unknown): Promise<T> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(reason());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(reason());
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/**
 * Aborts after `ms` with a TimeoutError, as AbortSignal.timeout does, but on the global setTimeout:
 * Node keeps AbortSignal.timeout's timer internal, out of reach of fake timers, and a test of a
 * timeout must hold the clock while the requests that should succeed are answered. The timer
 * holds no process open.
 */
export function timeoutSignal(ms: number): AbortSignal {
  const controller = new AbortController();
  setTimeout(
    () => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    ms,
  ).unref();
  return controller.signal;
}

/** `work`, or a DeadlineError saying `message()` once `ms` have passed; the timer ends with the work. */
export function withTimeout<T>(work: Promise<T>, ms: number, message: () => string): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  return raceAbort(work, controller.signal, () => new DeadlineError(message())).finally(() => clearTimeout(timer));
}

/** Whether `work` settles within `ms`; waiting longer is the caller's to decide (a harder signal, a kill). */
export function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  return withTimeout(work, ms, () => "").then(
    () => true,
    (err: unknown) => !(err instanceof DeadlineError),
  );
}
