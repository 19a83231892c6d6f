/*
 * Writes `status/<node>.json` to the store every interval and soon after each change, so that
 * `servicelb status` shows which config every node runs. Writes never overlap (until runs one
 * at a time); a burst of changes folds into one write after the one in flight.
 */

import type { Logger } from "../adapters/log.js";
import type { ObjectStore } from "../adapters/object-store.js";
import { until, type Loop } from "./until.js";

export interface StatusReporterOptions {
  store: Pick<ObjectStore, "putStatus">;
  node: string;
  intervalMs: number;
  report: () => unknown;
  log: Logger;
  onFailure?: (err: unknown) => void;
}

export interface StatusReporter {
  /** Report now (after an apply or a failure). */
  changed(): void;
  stop(): Promise<void>;
}

export function startStatusReporter(options: StatusReporterOptions): StatusReporter {
  const loop: Loop = until(() => options.store.putStatus(options.node, options.report()), {
    name: "status report",
    periodMs: options.intervalMs,
    jitter: 0.1,
    immediate: true,
    log: options.log,
    onFailure: options.onFailure,
  });
  return { changed: () => loop.kick(), stop: () => loop.stop() };
}
