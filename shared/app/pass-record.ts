/*
 * The store's record of the last full pass (reconcile.json), which `servicelb status` reports: a
 * failure at once, a success when this instance recorded a failure or no record lately. The
 * writes go out one after another, behind the pass: they never delay a delivery's answer, and a
 * store that cannot take one is the failure being recorded.
 */

import type { Logger } from "../adapters/log.js";
import type { ObjectStore, PassRecord } from "../adapters/store.js";
import { errorMessage } from "../core/error-message.js";

/** Where a pass is; "layout" is a cold instance reading the newest config's backend layout from the store. */
export type Stage = "list" | "layout" | "render" | "publish" | "notify";

export interface PassFailure {
  stage: Stage;
  err: unknown;
  transient: boolean;
  eventId: string;
}

/**
 * How often a succeeding instance writes its pass record again when nothing else makes it: so
 * that a failure recorded by an instance that has gone since does not stand for longer.
 */
const PASS_RECORD_REFRESH_MS = 60_000;
/** A failure's message in the pass record is cut here: the log line has it whole. */
const MESSAGE_CHARS = 1000;

export class PassRecorder {
  private failing: { since: string; passes: number } | null = null;
  private recordedAt: number | undefined;
  private recordedFailure = false;
  private recording: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Pick<ObjectStore, "putPassRecord">,
    private readonly generator: string,
    private readonly log: Logger,
  ) {}

  /** A pass ended: `failure`, or null when it succeeded. */
  record(failure: PassFailure | null): void {
    const at = new Date().toISOString();
    const failing = failure ? { since: this.failing?.since ?? at, passes: (this.failing?.passes ?? 0) + 1 } : null;
    this.failing = failing;
    const due = this.recordedAt === undefined || Date.now() - this.recordedAt >= PASS_RECORD_REFRESH_MS;
    if (!failure && !this.recordedFailure && !due) return;
    this.recordedAt = Date.now();
    this.recordedFailure = failure !== null;
    const record: PassRecord = {
      at,
      generator: this.generator,
      failure:
        failure && failing
          ? {
              ...failing,
              stage: failure.stage,
              message: errorMessage(failure.err).slice(0, MESSAGE_CHARS),
              transient: failure.transient,
              eventId: failure.eventId,
            }
          : null,
    };
    this.recording = this.recording
      .then(() => this.store.putPassRecord(record))
      .catch((err: unknown) => this.log.warn({ err }, "cannot record the pass in the store (reconcile.json)"));
  }

  /** Settles once every record asked for so far is written (or its failure logged). */
  written(): Promise<void> {
    return this.recording;
  }
}
