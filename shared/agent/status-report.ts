/*
 * The agent's report, `status/<node>.json`: its schema (what `servicelb status` reads) and the
 * loop that writes it to the store every interval and a second after a change, so that `servicelb
 * status` shows which config every node runs. Changes within that second fold into one write:
 * during a rollout a node applies several configs a second, and a write per config would cost the
 * store a request per node per change (Cloud Storage also refuses more than about one write a
 * second to one object). Writes never overlap (until runs one at a time).
 */

import { z } from "zod";
import type { Logger } from "../adapters/log.js";
import type { ObjectStore } from "../adapters/store.js";
import { trafficReportSchema } from "../core/rollout/rollout.js";
import { agentErrorSchema, appliedSchema } from "./node-state.js";
import { type Loop, until } from "./until.js";

/** Whether the agent can pull from the store (store-watch.ts). */
export const pullHealthSchema = z.object({
  /** The last completed pull: pin.json, the listing (or the pin), and the GET of the config it named when there was one. */
  lastSuccessAt: z.string().nullable(),
  /** Pulls failed since the last complete one: the store's failures and a pin.json that is not a pin alike. */
  consecutiveFailures: z.number(),
  lastFailure: z.object({ at: z.string(), message: z.string() }).nullable(),
  /** No completed pull for longer than staleAfterSeconds (--stale-pull-periods × --poll-interval). */
  stale: z.boolean(),
  staleAfterSeconds: z.number(),
});
export type PullHealth = z.infer<typeof pullHealthSchema>;

const restartSchema = z.object({
  at: z.string(),
  cause: z.enum(["master-exited", "worker-lost"]),
  reason: z.string(),
  code: z.number().nullable(),
  signal: z.string().nullable(),
  servedMs: z.number().nullable(),
  quickCrashes: z.number(),
  delayMs: z.number(),
});

/** `status/<node>.json`: what one agent reports to the store, and what `servicelb status` reads. */
export const nodeStatusSchema = z.object({
  node: z.string(),
  /** The config HAProxy runs; null until it serves one. */
  applied: appliedSchema.nullable(),
  lastError: agentErrorSchema.nullable(),
  /** A failed config waiting for its retry. */
  backoff: z.object({ key: z.string(), attempts: z.number(), retryAt: z.string() }).nullable(),
  /** Reports of agents before pins and skipped keys existed have neither. */
  pinned: z.object({ key: z.string(), pinnedAt: z.string() }).nullable().default(null),
  skipped: z.array(z.object({ key: z.string(), reason: z.string() })).default([]),
  haproxy: z.object({
    running: z.boolean(),
    // Optional: agents before these fields still report.
    /** Masters restarted and workers replaced since the agent started. */
    restarts: z.number().optional(),
    lastRestart: restartSchema.nullable().optional(),
    /** A restart waiting out its backoff (a master that keeps crashing). */
    pendingRestart: z.object({ at: z.string(), delayMs: z.number(), quickCrashes: z.number() }).nullable().optional(),
  }),
  /** How often the agent reports: a report much older than this means the agent is gone or cut off. */
  pull: pullHealthSchema.optional(),
  reportIntervalSeconds: z.number(),
  reportedAt: z.string(),
  /** e.g. "servicelb/0.1.0" */
  agent: z.string(),
  /**
   * The kinds of config digest the agent verifies (core/publish/config-digest.ts). Agents before tree1
   * report none and verify sha256 only: publishers keep to sha256 while one such report is there.
   */
  digests: z.array(z.string()).default([]),
  /** How configs may be published for it besides whole: `chunks1` (core/publish/chunk-manifest.ts). */
  formats: z.array(z.string()).default([]),
  /**
   * The most file descriptors HAProxy may open on this node, and how many of them it takes before
   * a config's listeners and servers (core/model/descriptors.ts); null when the agent cannot tell, and in
   * reports of agents from before. Publishers keep configs within the smallest node's room.
   */
  openFiles: z.object({ limit: z.number(), reserved: z.number() }).nullable().default(null),
  /**
   * Renewed certificate files (certificate-watch.ts): how many were swapped in without a reload,
   * the last, and each file not served and why. Reports of agents from before have none.
   */
  certificates: z
    .object({
      checkedAt: z.string().nullable(),
      swapped: z.number(),
      lastSwap: z
        .object({ certificate: z.string(), at: z.string(), serial: z.string(), notAfter: z.string() })
        .nullable(),
      refused: z.array(z.object({ certificate: z.string(), reason: z.string(), since: z.string() })),
    })
    .optional(),
  /**
   * The certificate files of Gateway HTTPS listeners the node holds and that parse, as
   * certificateRefs (`namespace/name`, gateway-certificates.ts): names only, never contents. Null
   * without --gateway-cert-dir, and in reports of agents from before.
   */
  gatewayCertificates: z.array(z.string()).nullable().default(null),
  /**
   * With --canary, HAProxy's per-backend counters over the rollout's current gate window
   * (agent/traffic-sampler.ts); null outside a rollout, absent without --canary.
   */
  traffic: trafficReportSchema.nullable().optional(),
});

export type NodeStatus = z.infer<typeof nodeStatusSchema>;

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
