/*
 * Racing work against an AbortSignal, for deadlines that must hold even when the work ignores the
 * signal (an SDK step, a list that pages on): the caller stops waiting, the work is left to end.
 */

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
