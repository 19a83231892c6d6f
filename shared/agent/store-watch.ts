/*
 * The store as the agent's loops use it, watched:
 * - whether pulls complete: a pull is the read of pin.json, then a listing and, when it names a
 *   config newer than the running one, that config's GET; while a pin is set, the pin names the
 *   config instead of the listing. A pin that cannot be read fails the pull, and a listing that
 *   works while the GET it leads to keeps failing (an object the store serves one byte at a
 *   time, one over the size cap) is no successful pull, so the agent can say it has not been
 *   able to pull for so long;
 * - every failure counted by operation and reason;
 * - stop() abandons every request in flight at once, so that stopping the agent never waits
 *   for the store (the request itself ends at its deadline, or when the store is closed).
 */

import { StoreError, type ObjectStore } from "../adapters/store.js";
import { ObjectTooLargeError, StoreDeadlineError } from "../adapters/store-limits.js";
import type { AgentMetrics } from "./metrics.js";
import type { PullHealth } from "./status-report.js";
import { errorMessage } from "../core/error-message.js";
import { raceAbort } from "../core/deadline.js";

export interface WatchedStore {
  store: Pick<ObjectStore, "history" | "get" | "getPin" | "getNewestHint" | "getRollout" | "putStatus">;
  health(): PullHealth;
  stop(): void;
}

export interface StoreWatchOptions {
  metrics: AgentMetrics;
  /** No completed pull for this long is "stale". */
  staleAfterMs: number;
  now?: () => number;
}

type Reason = "deadline" | "too-large" | "stopping" | "error";

function reasonOf(err: unknown): Reason {
  const cause = err instanceof StoreError ? err.cause : err;
  if (cause instanceof StoreDeadlineError) return "deadline";
  if (cause instanceof ObjectTooLargeError) return "too-large";
  return "error";
}

export function watchStore(inner: ObjectStore, o: StoreWatchOptions): WatchedStore {
  const now = o.now ?? Date.now;
  const since = now();
  const stopping = new AbortController();
  let lastSuccess: number | null = null;
  let failures = 0;
  let lastFailure: { at: number; message: string } | null = null;
  /** Set by a listing (or a pin), until the GET of the key it named has settled: what to restore if that GET fails. */
  let listed: { key: string; lastSuccess: number | null; failures: number } | null = null;
  /** Where the pulls stood before a newest.json read counted as a completed pull (a listing may follow it). */
  let beforeHint: { lastSuccess: number | null; failures: number } | null = null;

  const setLastSuccess = (at: number | null) => {
    lastSuccess = at;
    o.metrics.lastSuccessfulPull.set(at === null ? 0 : at / 1000);
  };
  const pullFailed = (err: unknown) => {
    failures++;
    lastFailure = { at: now(), message: errorMessage(err) };
  };

  /** Runs `op`, unless or until the agent stops: then it rejects at once (the request is left to its deadline). */
  async function guarded<T>(operation: string, op: () => Promise<T>): Promise<T> {
    const abandoned = () =>
      new StoreError(`S3 ${operation} at ${inner.endpoint} abandoned: the agent is stopping`, { transient: true });
    try {
      // Once stopping, nothing new is sent.
      if (stopping.signal.aborted) throw abandoned();
      return await raceAbort(op(), stopping.signal, abandoned);
    } catch (err) {
      o.metrics.storeFailures.inc({ operation, reason: stopping.signal.aborted ? "stopping" : reasonOf(err) });
      throw err;
    }
  }

  return {
    store: {
      async history(options) {
        // A listing after a hint: the hint did not end the pull after all.
        if (beforeHint) {
          setLastSuccess(beforeHint.lastSuccess);
          failures = beforeHint.failures;
          beforeHint = null;
        }
        const entries = await guarded("list", () => inner.history(options)).catch((err: unknown) => {
          if (!stopping.signal.aborted) pullFailed(err);
          throw err;
        });
        // The key the pull goes for: keys nobody follows are skipped without a GET.
        const newest = entries.find((e) => e.untrusted === undefined)?.key;
        listed = newest === undefined ? null : { key: newest, lastSuccess, failures };
        // Counted now, taken back if the GET it leads to fails: /status is right in between too.
        setLastSuccess(now());
        failures = 0;
        return entries;
      },
      async get(key, options) {
        try {
          const config = await guarded("get", () => inner.get(key, options));
          if (listed?.key === key) {
            // The pull completes now, not when it listed (a large config may take a while).
            setLastSuccess(now());
            listed = null;
          }
          return config;
        } catch (err) {
          // The config the last listing named cannot be had: that pull did not complete. (A
          // ping's key that fails is not a failed pull: the agent lists the store instead.)
          if (listed?.key === key && !stopping.signal.aborted) {
            setLastSuccess(listed.lastSuccess);
            failures = listed.failures;
            pullFailed(err);
            listed = null;
          }
          throw err;
        }
      },
      async getNewestHint() {
        // Read after the pin, a hint that names what runs ends the pull (pull-loop.ts): counted as a
        // completed pull, taken back if a listing follows. One that cannot be read is no failure
        // of its own: the pull lists the store instead.
        const hint = await guarded("get", () => inner.getNewestHint());
        if (hint !== null) {
          beforeHint = { lastSuccess, failures };
          setLastSuccess(now());
          failures = 0;
        }
        return hint;
      },
      async getPin() {
        try {
          const pin = await guarded("get", () => inner.getPin());
          // A pin stands in for the listing: it names the config the pull is after, and while
          // that config runs the pin's read is the whole pull.
          if (pin !== null) {
            listed = { key: pin.key, lastSuccess, failures };
            setLastSuccess(now());
            failures = 0;
          }
          return pin;
        } catch (err) {
          // Every pull reads the pin first: one that cannot be read (or is not a pin) fails the pull.
          if (!stopping.signal.aborted) {
            listed = null;
            pullFailed(err);
          }
          throw err;
        }
      },
      async getRollout() {
        // Read beside the pin with --canary: a rollout record names the config the pull is after,
        // as a pin does (a failed GET of that config counts against the pull when it is retried).
        try {
          const record = await guarded("get", () => inner.getRollout());
          if (record !== null) {
            setLastSuccess(now());
            failures = 0;
          }
          return record;
        } catch (err) {
          if (!stopping.signal.aborted) pullFailed(err);
          throw err;
        }
      },
      putStatus: (node, status) => guarded("put", () => inner.putStatus(node, status)),
    },
    health() {
      return {
        lastSuccessAt: lastSuccess === null ? null : new Date(lastSuccess).toISOString(),
        consecutiveFailures: failures,
        lastFailure: lastFailure && { at: new Date(lastFailure.at).toISOString(), message: lastFailure.message },
        stale: now() - (lastSuccess ?? since) > o.staleAfterMs,
        staleAfterSeconds: o.staleAfterMs / 1000,
      };
    },
    stop: () => stopping.abort(),
  };
}
