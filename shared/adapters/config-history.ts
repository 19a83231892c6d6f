/*
 * The history of configs a store holds, as a publisher lists it (keys only, newest first, each
 * judged by name) and retains it: which configs a prune deletes (all but the newest `keep` trusted
 * ones, never the pinned one nor those rollout.json names), and the records beside them that go
 * with them (the layouts but the newest config's, the chunks no retained config names).
 */

import { compareConfigNames } from "../core/publish/config-key.js";
import { judgeKeys } from "../core/publish/key-trust.js";
import type { ConfigObjects } from "./config-objects.js";
import type { NewestConfig } from "./newest-config.js";
import type { PublishedChunks } from "./published-chunks.js";
import { deleteKeys, type StoreRecords } from "./store-records.js";

export interface HistoryEntry {
  key: string;
  epoch: number;
  revision: string;
  seq: number;
  sha256Prefix: string;
  size: number;
  lastModified: Date;
  /** Why the key may not be followed (core/publish/key-trust.ts): publishers, agents and `status` skip it. */
  untrusted?: string;
}

/** Newest first, in decision order; keys only, each judged by name (`untrusted`). */
export async function listHistory(objects: ConfigObjects, limit?: number): Promise<HistoryEntry[]> {
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) {
    throw new Error(`history limit must be an integer >= 0, got ${limit}`);
  }
  const entries = await objects.list();
  const verdicts = judgeKeys(entries.map((e) => e.name));
  const described = entries.map((entry, i) => ({
    key: entry.key,
    epoch: entry.name.epoch,
    revision: entry.name.revision.toString(),
    seq: entry.name.seq,
    sha256Prefix: entry.name.shaPrefix,
    size: entry.size,
    lastModified: entry.lastModified,
    ...(verdicts[i] === null ? {} : { untrusted: verdicts[i]! }),
  }));
  return described.reverse().slice(0, limit ?? described.length);
}

/** Deletes every config older than the newest `keep` trusted ones; returns the deleted keys. */
export async function pruneConfigs(
  store: { objects: ConfigObjects; records: StoreRecords; newest: NewestConfig; chunks: PublishedChunks },
  keep: number,
): Promise<string[]> {
  const { objects, records, newest, chunks } = store;
  assertKeep(keep, "keep");
  const pinned = await records.getPin().catch(() => null);
  // The configs a canary rollout has nodes run (core/rollout/rollout.ts) stay, as the pinned one does.
  const rollout = await records.getRollout().catch(() => null);
  const held = new Set(
    [pinned?.key, rollout?.stable.key, rollout?.rollout?.candidate.key].filter((k): k is string => k !== undefined),
  );
  const configs = await objects.list();
  // Counted in trusted keys: far-ahead keys, which sort newest, must not push the history out.
  const verdicts = judgeKeys(configs.map((e) => e.name));
  const trusted = configs.filter((_, i) => verdicts[i] === null);
  const oldestKept = trusted.length > keep ? trusted[trusted.length - keep]!.name : null;
  const older = oldestKept ? configs.filter((e) => compareConfigNames(e.name, oldestKept) < 0) : [];
  const doomed = older.map((entry) => entry.key).filter((key) => !held.has(key));
  await deleteKeys(objects.blobs, doomed);
  newest.pruned(configs.length - doomed.length);
  // Only a cold function instance reads a layout, and only the newest config's: older records
  // (one per Service added or removed) are deleted. One that a racing publish wrote a moment ago
  // may go too; its instance holds it in memory, and another would start afresh (one reload).
  const retained = configs.slice(older.length);
  await records.pruneLayouts((await newest.find(retained)).head?.layoutDigest);
  await chunks.prune([...retained.map((e) => e.key), ...held]);
  return doomed;
}

export function assertKeep(keep: number, name: string): void {
  if (!Number.isInteger(keep) || keep < 1) {
    throw new Error(`${name} must be an integer >= 1 (the newest config is never deleted), got ${keep}`);
  }
}
