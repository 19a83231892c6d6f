/*
 * What one publish does, decided from what the store holds (pure; object-store.ts does the I/O).
 *
 * The store's mark is the newest (epoch, revision) it records: the newest verified config's, or
 * the newest view marker's. A view marker is what a pass leaves when it found nothing to change
 * but saw a newer revision than the mark: without it, an older pass finishing after that one
 * could still publish (invariant 1, the "newer pass found nothing to change" case).
 *
 * - At or past the mark: publish in the mark's epoch, with seq = newest seq + 1, so that a later
 *   decision from an equal view (other settings, another template, an upgrade) wins whatever
 *   its sha; identical bytes write no config (invariant 2), only a marker if the view is newer.
 * - Below the mark: either a stale pass (it listed before another pass recorded a newer view)
 *   or a cluster whose revisions went back (etcd restore, a new cluster behind the same store,
 *   a restarted local stack). The decision needs evidence from the live cluster (see
 *   object-store.ts publish): a fresh list. Only a snapshot listed after that evidence was seen
 *   (`restore`) starts the next epoch.
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
 * The newest view marker that may count. A marker is only a key (anyone with write access can
 * make one), so it may not lead the newest config by more than one epoch: a forged far-future
 * marker then costs at most one epoch, never the ability to publish.
 */
export function pickView(views: readonly Mark[], newest: ConfigName | null): Mark | null {
  const maxEpoch = (newest?.epoch ?? 0) + 1;
  let best: Mark | null = null;
  for (const v of views) if (v.epoch <= maxEpoch && (!best || compareMarks(v, best) > 0)) best = v;
  return best;
}

export function decidePublish(
  state: StoreState,
  ours: { revision: bigint; sha256: string },
  restore: boolean,
): Decision {
  const mark = storeMark(state);
  const seq = state.newest ? state.newest.name.seq + 1 : 0;
  if (!mark) return { kind: "write", epoch: 0, revision: ours.revision, seq, newEpoch: false };
  // The fleet already has these bytes: whatever the views, there is nothing to fix.
  const sameBytes = state.newest?.sha256 === ours.sha256;
  if (ours.revision < mark.revision) {
    if (sameBytes) return { kind: "unchanged", view: null };
    if (!restore) return { kind: "behind", mark };
    return { kind: "write", epoch: mark.epoch + 1, revision: ours.revision, seq, newEpoch: true };
  }
  if (sameBytes)
    return {
      kind: "unchanged",
      view: ours.revision > mark.revision ? { epoch: mark.epoch, revision: ours.revision } : null,
    };
  return { kind: "write", epoch: mark.epoch, revision: ours.revision, seq, newEpoch: false };
}
