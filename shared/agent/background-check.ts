import type { StoredConfig } from "../adapters/object-store.js";
import type { CheckVerdict } from "./verdict.js";

/**
 * The `haproxy -c` of endpoint-only changes that are already live through the runtime API. At
 * most one check runs; changes applied meanwhile are checked after it (the newest only). The
 * verdict is acted on by the apply loop (activation.ts), never here.
 */

/** Endpoint-only changes live through the runtime API whose `haproxy -c` has not passed yet. */
export interface Unvalidated {
  config: StoredConfig;
  /** When its pull ended (apply duration). */
  t0: number;
}

/** A background `haproxy -c` of a config already live through the runtime API. */
export interface Validation {
  config: StoredConfig;
  t0: number;
  abort: AbortController;
  /** Settles (never rejects) with the check's verdict. */
  done: Promise<CheckVerdict>;
  settled: boolean;
  /** A structural config was written over it: its verdict no longer matters. */
  cancelled: boolean;
}

export class BackgroundCheck {
  /** Newest config live through the runtime API but not yet checked and written. */
  pending: Unvalidated | null = null;
  /** The check in flight, if any. */
  running: Validation | null = null;
  /** Checks in a row that could not run to a verdict. */
  retries = 0;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly verdict: (config: StoredConfig, signal: AbortSignal) => Promise<CheckVerdict>,
    private readonly stopped: () => boolean,
  ) {}

  /** Starts the check of `pending`, unless one runs already (the loop checks the newest one after it: coalescing). */
  start(): void {
    const u = this.pending;
    if (!u || this.running || this.stopped()) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const abort = new AbortController();
    const v: Validation = {
      config: u.config,
      t0: u.t0,
      abort,
      settled: false,
      cancelled: false,
      done: this.verdict(u.config, abort.signal).then((r) => {
        v.settled = true;
        return r;
      }),
    };
    this.running = v;
  }

  /** A check no longer matters (its config was replaced, or HAProxy lost it): kill it, or its retry. */
  cancel(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.retries = 0;
    const v = this.running;
    if (!v) return;
    v.cancelled = true;
    v.abort.abort();
    this.running = null;
  }

  /** Cancels and forgets the live unchecked changes; returns them. */
  drop(): Unvalidated | null {
    const dropped = this.pending;
    this.cancel();
    this.pending = null;
    return dropped;
  }

  /** The check could not run: try again in `ms` (or sooner, when a newer change goes live). */
  retryIn(ms: number, then: () => void): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.stopped()) return;
      this.start();
      then();
    }, ms);
  }
}
