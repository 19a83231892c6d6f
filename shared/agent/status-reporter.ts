/*
 * Writes `status/<node>.json` to the store every interval and a second after a change, so that
 * `servicelb status` shows which config every node runs. Changes within that second fold into
 * one write: during a rollout a node applies several configs a second, and a write per config
 * would cost the store a request per node per change (Cloud Storage also refuses more than about
 * one write a second to one object). Writes never overlap (until runs one at a time).
 */

import type { Logger } from "../adapters/log.js";
import type { ObjectStore } from "../adapters/store.js";
import { until, type Loop } from "./until.js";

/** How long after a change its report is written. */
export const SETTLE_MS = 1000;

export interface StatusReporterOptions {
  store: Pick<ObjectStore, "putStatus">;
  node: string;
  intervalMs: number;
  report: () => unknown;
  log: Logger;
  onFailure?: (err: unknown) => void;
}

export interface StatusReporter {
  /** Report soon (after an apply or a failure): SETTLE_MS later, with every change meanwhile. */
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
  let settling: NodeJS.Timeout | undefined;
  let stopped = false;
  return {
    changed() {
      if (stopped) return;
      settling ??= setTimeout(() => {
        settling = undefined;
        loop.kick();
      }, SETTLE_MS);
    },
    stop() {
      stopped = true;
      clearTimeout(settling);
      settling = undefined;
      return loop.stop();
    },
  };
}
