/*
 * What one publish does, decided from what the store holds (pure; adapters/config-publisher.ts does the I/O).
 *
 * The store's mark is the newest (epoch, revision) it records: the newest verified config's, or
 * the newest view marker's. A view marker is what a pass leaves when it found nothing to change
 * but saw a newer revision than the mark: without it, an older pass finishing after that one
 * could still publish (docs/design.md#invariant-1-the-latest-decision-wins: the "newer pass found
 * nothing to change" case).
 *
 * - At or past the mark: publish in the mark's epoch. The seq is 0 for a view no config has, and
 *   the newest seq + 1 for a later decision from the newest config's view (other settings,
 *   another template, an upgrade), so that it wins whatever its sha; identical bytes write no
 *   config (docs/design.md#the-reconcile-function: a config byte-identical to the newest is not
 *   published), only a marker if the view is newer.
 * - Below the mark: either a stale pass (it listed before another pass recorded a newer view)
 *   or a cluster whose revisions went back (etcd restore, a new cluster behind the same store,
 *   a restarted local stack). The decision needs evidence from the live cluster (see
 *   adapters/config-publisher.ts publish): a fresh list. Only a snapshot listed after that evidence was seen
 *   (`restore`) starts the next epoch, the newest config's + 1 (core/publish/key-trust.ts bounds it).
 */

import { compareMarks, type ConfigName, type Mark } from "./config-key.js";

export interface StoreState {
  /** The newest config whose object verified (skipped ones are not here). */
  newest: { name: ConfigName; sha256: string } | null;
  /** The newest usable view marker (see pickView). */
  view: Mark | null;
}

export type Decision =
  /** Nothing to write but, when `view` is set, that marker. */
  | { kind: "unchanged"; view: Mark | null }
  | { kind: "write"; epoch: number; revision: bigint; seq: number; newEpoch: boolean }
  /** The snapshot is below the store's mark: stale, or the cluster went back. */
  | { kind: "behind"; mark: Mark };

export function storeMark(state: StoreState): Mark | null {
  const fromConfig = state.newest && { epoch: state.newest.name.epoch, revision: state.newest.name.revision };
  if (!fromConfig) return state.view;
  if (!state.view) return fromConfig;
  return compareMarks(state.view, fromConfig) > 0 ? state.view : fromConfig;
}

/**
 * The newest view marker that may count. A marker is only a key that anyone with write access can
 * make, and it carries no config, so it never moves an epoch and never claims more than a pass
 * could have seen: it counts only in the newest config's epoch (none without a config), and only
 * at or below `seen`, the newest revision the caller knows the live cluster has reached (its
 * snapshot's, or a fresh list's; null when it knows none, and every marker of the epoch counts).
 * A forged marker above the live cluster thus costs nothing; a genuine one is never above it,
 * unless the cluster went back, when the newest config decides alone.
 */
export function pickView(views: readonly Mark[], newest: ConfigName | null, seen: bigint | null): Mark | null {
  if (!newest) return null;
  let best: Mark | null = null;
  for (const v of views)
    if (v.epoch === newest.epoch && (seen === null || v.revision <= seen) && (!best || compareMarks(v, best) > 0))
      best = v;
  return best;
}

export function decidePublish(
  state: StoreState,
  ours: { revision: bigint; sha256: string },
  restore: boolean,
): Decision {
  const mark = storeMark(state);
  if (!mark) return { kind: "write", epoch: 0, revision: ours.revision, seq: 0, newEpoch: false };
  // The fleet already has these bytes: whatever the views, there is nothing to fix.
  const sameBytes = state.newest?.sha256 === ours.sha256;
  if (ours.revision < mark.revision) {
    if (sameBytes) return { kind: "unchanged", view: null };
    if (!restore) return { kind: "behind", mark };
    return { kind: "write", epoch: mark.epoch + 1, revision: ours.revision, seq: 0, newEpoch: true };
  }
  if (sameBytes)
    return {
      kind: "unchanged",
      view: ours.revision > mark.revision ? { epoch: mark.epoch, revision: ours.revision } : null,
    };
  const seq = nextSeq(state.newest?.name ?? null, mark.epoch, ours.revision);
  return { kind: "write", epoch: mark.epoch, revision: ours.revision, seq, newEpoch: false };
}

/**
 * The seq of a config published at (epoch, revision) after `newest`. It counts the decisions from
 * one view only, so that publishing never fills the field: a seq grows only while the cluster
 * stands still, and core/publish/key-trust.ts bounds each step.
 */
export function nextSeq(newest: ConfigName | null, epoch: number, revision: bigint): number {
  return newest && newest.epoch === epoch && newest.revision === revision ? newest.seq + 1 : 0;
}
