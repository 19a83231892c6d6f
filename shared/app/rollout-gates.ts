/*
 * The canary rollout's runner (docs/design.md#canary-rollouts): run by the reconcile function on
 * every pass — events and PingSource ticks alike — after the publish and before the pings. It
 * reads rollout.json, the newest config and, while a rollout needs them, the nodes' reports; asks
 * the pure state machine (core/rollout/rollout.ts) for the next record; and writes it back when it
 * changed. Nothing is kept between passes but a cache of config texts by key: an instance that
 * replaces another mid-rollout reads the same record and continues.
 */

import type { Logger } from "../adapters/log.js";
import { type ObjectStore, StoreError } from "../adapters/store.js";
import { nodeStatusSchema } from "../agent/status-report.js";
import { changeKind } from "../core/rollout/change-kind.js";
import { parseConfigKey } from "../core/publish/config-key.js";
import { transplantEndpoints } from "../core/haproxy-config/endpoint-transplant.js";
import { type NodeView, type RolloutSettings, stepRollout } from "../core/rollout/rollout.js";
import { initialRecord, type RolloutConfig, type RolloutRecord } from "../core/rollout/rollout-record.js";

export type RolloutStore = Pick<
  ObjectStore,
  "getRollout" | "putRollout" | "deleteRollout" | "get" | "listStatuses" | "putTrack" | "pruneTracks"
>;

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

  /** Nodes whose reports say their agent runs without --canary: warned about once per instance. */
  let warned = "";
  async function nodes(): Promise<NodeView[]> {
    const views: NodeView[] = [];
    const unaware = new Set<string>();
    for (const raw of await store.listStatuses()) {
      const parsed = nodeStatusSchema.safeParse(raw);
      if (!parsed.success) continue;
      const r = parsed.data;
      // A node that serves nothing, or that has not reported for three of its intervals (and a few
      // seconds for a slow write), is not part of the fleet a rollout is judged on.
      const age = now().getTime() - Date.parse(r.reportedAt);
      if (!r.haproxy.running && r.applied === null) continue;
      if (age > 3 * r.reportIntervalSeconds * 1000 + REPORT_SLACK_MS) continue;
      if (r.traffic === undefined) unaware.add(r.node);
      views.push({
        node: r.node,
        applied: r.applied?.key ?? null,
        failure: r.lastError && { key: r.lastError.key, stage: r.lastError.stage, message: r.lastError.message },
        traffic: r.traffic ?? null,
      });
    }
    const names = [...unaware].sort().join(",");
    if (names !== "" && names !== warned)
      log.warn(
        { nodes: [...unaware].slice(0, 20), count: unaware.size },
        "rollout: agents without --canary follow the newest config whatever rollout.json says: a rollout cannot hold them back",
      );
    warned = names;
    return views;
  }

  /**
   * While the nodes outside the admitted waves run another config than the newest, they run the
   * stable config with the newest endpoints (core/haproxy-config/endpoint-transplant.ts), stored as a stable track.
   */
  async function withTrack(record: RolloutRecord, newest: RolloutConfig, events: string[]): Promise<RolloutRecord> {
    if (newest.key === record.stable.key || (record.rollout === null && record.blocked === null)) return record;
    const stableText = await text(record.stable.key);
    const track = transplantEndpoints(stableText, await text(newest.key));
    if (track === stableText) return record;
    const stored = await store.putTrack(track, parseConfigKey(newest.key)?.revision.toString() ?? "0");
    texts.set(stored.key, track);
    events.push(`the newest endpoints (${newest.key}) go to the nodes on the stable config at once, as ${stored.key}`);
    return { ...record, stable: { key: stored.key, sha256: stored.sha256 } };
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
        // Which node runs what is unknown: the agents hold (agent/pull-loop.ts), and so does the function.
        log.error(
          { err: err.message },
          "rollout: rollout.json is not a rollout record: every node holds until it is one again",
        );
        return null;
      }
      const record = before ?? initialRecord(newest, now());
      const changed = record.rollout !== null || newest.key !== record.stable.key;
      const keys = [record.stable.key, newest.key, record.rollout?.candidate.key, ...record.rejected.map((r) => r.key)];
      // Texts first (the classification is synchronous): only those of configs it may compare.
      const known = new Map<string, string>();
      if (changed)
        for (const key of new Set(keys)) if (key !== undefined) known.set(key, await text(key).catch(() => ""));
      // The reports (a GET per node) only for a rollout under way or about to start, never for an
      // endpoint change that goes everywhere at once.
      const a = known.get(record.stable.key);
      const b = known.get(newest.key);
      const needsNodes = record.rollout !== null || (changed && (!a || !b || changeKind(a, b) === "structural"));
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
      const record2 = await withTrack(next, newest, events);
      const written = before === null || strip(record2) !== strip(before);
      if (written) await store.putRollout(record2);
      // A stable track replaced: the one before is no node's target any more.
      if (before !== null && before.stable.key !== record2.stable.key && before.stable.key.includes("/tracks/"))
        await store
          .pruneTracks([record2.stable.key])
          .catch((err: unknown) => log.warn({ err }, "rollout: cannot delete old stable-track configs"));
      for (const event of events) log.info({ rollout: summary(record2) }, `rollout: ${event}`);
      return { record: record2, events, written };
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
