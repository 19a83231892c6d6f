/*
 * The canary rollout's runner (docs/design.md#canary-rollouts): run by the reconcile function on
 * every pass — events and PingSource ticks alike — after the publish and before the pings. It
 * reads rollout.json, the newest config and, while a rollout needs them, the nodes' reports; asks
 * the pure state machine (core/rollout.ts) for the next record; and writes it back when it
 * changed. Nothing is kept between passes but a cache of config texts by key: an instance that
 * replaces another mid-rollout reads the same record and continues.
 */

import type { Logger } from "../adapters/log.js";
import { type ObjectStore, StoreError } from "../adapters/store.js";
import { nodeStatusSchema } from "../agent/node-status.js";
import { changeKind } from "../core/change-kind.js";
import {
  initialRecord,
  type NodeView,
  type RolloutConfig,
  type RolloutRecord,
  type RolloutSettings,
  stepRollout,
} from "../core/rollout.js";

export type RolloutStore = Pick<ObjectStore, "getRollout" | "putRollout" | "deleteRollout" | "get" | "listStatuses">;

export interface RolloutStep {
  record: RolloutRecord;
  events: string[];
  written: boolean;
}

export interface RolloutGates {
  /**
   * One step with `newest` the newest published config; null with canary off (a rollout.json left
   * from when it was on is deleted at the first pass, so that agents follow the newest again).
   */
  step(newest: RolloutConfig): Promise<RolloutStep | null>;
}

const REPORT_SLACK_MS = 5000;
/** Configs whose text a warm instance keeps: stable, candidate, newest and a rejected one or two. */
const CACHED_TEXTS = 8;

export function createRolloutGates(
  store: RolloutStore,
  settings: RolloutSettings | null,
  log: Logger,
  now: () => Date = () => new Date(),
): RolloutGates {
  const texts = new Map<string, string>();
  let cleared = false;

  async function text(key: string): Promise<string> {
    const cached = texts.get(key);
    if (cached !== undefined) return cached;
    const { config } = await store.get(key);
    texts.set(key, config);
    if (texts.size > CACHED_TEXTS) texts.delete(texts.keys().next().value!);
    return config;
  }

  async function nodes(): Promise<NodeView[]> {
    const views: NodeView[] = [];
    for (const raw of await store.listStatuses()) {
      const parsed = nodeStatusSchema.safeParse(raw);
      if (!parsed.success) continue;
      const r = parsed.data;
      // A node that serves nothing, or that has not reported for three of its intervals (and a few
      // seconds for a slow write), is not part of the fleet a rollout is judged on.
      const age = now().getTime() - Date.parse(r.reportedAt);
      if (!r.haproxy.running && r.applied === null) continue;
      if (age > 3 * r.reportIntervalSeconds * 1000 + REPORT_SLACK_MS) continue;
      views.push({
        node: r.node,
        applied: r.applied?.key ?? null,
        failure: r.lastError && { key: r.lastError.key, stage: r.lastError.stage, message: r.lastError.message },
        traffic: r.traffic ?? null,
      });
    }
    return views;
  }

  return {
    async step(published) {
      const newest = { key: published.key, sha256: published.sha256 };
      if (settings === null) {
        if (!cleared) {
          cleared = true;
          if ((await store.getRollout().catch(() => null)) !== null) {
            await store.deleteRollout();
            log.warn("canary is off: deleted rollout.json, so that every agent follows the newest config");
          }
        }
        return null;
      }
      let before: RolloutRecord | null;
      try {
        before = await store.getRollout();
      } catch (err) {
        if (!(err instanceof StoreError) || err.transient) throw err;
        // Which node runs what is unknown: the agents hold (agent/applier.ts), and so does the function.
        log.error(
          { err: err.message },
          "rollout: rollout.json is not a rollout record: every node holds until it is one again",
        );
        return null;
      }
      const record = before ?? initialRecord(newest, now());
      const needsNodes = record.rollout !== null || newest.key !== record.stable.key;
      const keys = [record.stable.key, newest.key, record.rollout?.candidate.key, ...record.rejected.map((r) => r.key)];
      // Texts first (the classification is synchronous): only those of configs it may compare.
      const known = new Map<string, string>();
      if (needsNodes)
        for (const key of new Set(keys)) if (key !== undefined) known.set(key, await text(key).catch(() => ""));
      let views: NodeView[] = [];
      if (needsNodes)
        try {
          views = await nodes();
        } catch (err) {
          if (!(err instanceof StoreError) || err.transient) throw err;
          // A report that does not parse (being rewritten, or hand-made): judged at the next pass.
          log.warn({ err: err.message }, "rollout: cannot read the nodes' reports: the gates wait for the next pass");
          return null;
        }
      const { record: next, events } = stepRollout(
        record,
        {
          newest,
          nodes: views,
          now: now(),
          // A config that cannot be read is judged structural: it rolls out in waves, never at once.
          classify: (from, to) => {
            const a = known.get(from);
            const b = known.get(to);
            return a && b ? changeKind(a, b) : "structural";
          },
        },
        settings,
      );
      const written = before === null || strip(next) !== strip(before);
      if (written) await store.putRollout(next);
      for (const event of events) log.info({ rollout: summary(next) }, `rollout: ${event}`);
      return { record: next, events, written };
    },
  };
}

const strip = (r: RolloutRecord) => JSON.stringify({ ...r, updatedAt: "" });

function summary(r: RolloutRecord) {
  return {
    stable: r.stable.key,
    candidate: r.rollout?.candidate.key ?? null,
    state: r.rollout?.state ?? null,
    wave: r.rollout ? r.rollout.wave + 1 : null,
  };
}
