/*
 * Which config keys may be followed (invariants 1 and 8). A key is a name that anyone with write
 * access to the store can make (every node holds such access), and whoever follows a key numbers
 * the next one from it: a key far ahead would be unbeatable, or make the next key overflow its
 * field. So a key is trusted only when it leads the trusted key before it, in decision order, by
 * a bounded step:
 *   epoch  at most EPOCH_LEAD (1): the publisher starts the next epoch from the newest config's,
 *          one restore at a time;
 *   seq    at most SEQ_LEAD (16): the publisher writes 0 for a new view and the newest seq + 1
 *          for another decision from the same view, so its own keys lead by 1 at most; the rest
 *          is room for keys deleted by hand;
 * and never at the last value of its field, which no key could follow. The first key of a listing
 * has no key before it: it is trusted in the lower half of each field only, so that reaching the
 * end of a field takes half of it in steps, each a trusted key, never one write. A caller that
 * verified a key before may name it as the anchor: it stands for the history before it.
 *
 * Only names are judged, so every reader of one listing (publisher, agents, `status`, `history`)
 * reaches the same verdicts without reading an object. A key trusted by name is still verified
 * against its object before it is used (adapters/config-objects.ts).
 */

import { type ConfigName, MAX_EPOCH, MAX_SEQ } from "./config-key.js";

export const EPOCH_LEAD = 1;
export const SEQ_LEAD = 16;
/** The first key of a listing starts below these. */
export const FIRST_EPOCH_BELOW = Math.ceil(MAX_EPOCH / 2);
export const FIRST_SEQ_BELOW = Math.ceil(MAX_SEQ / 2);

/** Why `name` may not be followed after `before` (the trusted key before it; null: none), or null. */
export function distrust(name: ConfigName, before: ConfigName | null): string | null {
  if (before === null) {
    if (name.epoch >= FIRST_EPOCH_BELOW)
      return `epoch ${name.epoch} with no key before it: a store's first key starts below epoch ${FIRST_EPOCH_BELOW}`;
    if (name.seq >= FIRST_SEQ_BELOW)
      return `seq ${name.seq} with no key before it: a store's first key starts below seq ${FIRST_SEQ_BELOW}`;
  } else {
    if (name.epoch > before.epoch + EPOCH_LEAD)
      return `epoch ${name.epoch} leads the key before it (epoch ${before.epoch}) by more than ${EPOCH_LEAD}`;
    if (name.seq > before.seq + SEQ_LEAD)
      return `seq ${name.seq} leads the key before it (seq ${before.seq}) by more than ${SEQ_LEAD}`;
  }
  if (name.epoch >= MAX_EPOCH || name.seq >= MAX_SEQ)
    return `epoch ${name.epoch}, seq ${name.seq}: the last value of a field, which no key could follow`;
  return null;
}

/**
 * The verdict on each of `sorted` (ascending decision order): null for a trusted key, else why it
 * is not. The key at `anchor`, when given, is trusted and judges the keys after it.
 */
export function judgeKeys(sorted: readonly ConfigName[], anchor?: number): Array<string | null> {
  let before: ConfigName | null = null;
  return sorted.map((name, i) => {
    const reason = i === anchor ? null : distrust(name, before);
    if (reason === null) before = name;
    return reason;
  });
}
