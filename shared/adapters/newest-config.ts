/*
 * Which config is newest, as a publisher finds it: the greatest key in decision order that is
 * trusted by name (core/publish/key-trust.ts: it leads the key before it by a bounded step) and
 * whose object verifies; a far-ahead, missing, mis-shaped or unverifiable newest key is skipped
 * and reported. What one publisher instance remembers between publishes (the keys it verified or
 * rejected, the newest it last saw, how many configs the store holds) lets a warm instance list
 * from the newest key on rather than the whole history (config-publisher.ts).
 */

import { judgeKeys } from "../core/publish/key-trust.js";
import type { ConfigEntry, ConfigHead, ConfigObjects } from "./config-objects.js";
import { StoreError } from "./store-error.js";

/** Verified keys a publisher remembers: the newest few are all it looks at. */
const VERIFIED_KEPT = 8;
/** Rejected keys a publisher remembers: a few passes' worth of the bodies a publish checks. */
const REJECTED_KEPT = 64;

/** A key that looked newest but could not be trusted. */
export interface SkippedKey {
  key: string;
  reason: string;
}

export class NewestConfig {
  /**
   * Keys this instance verified (or wrote), so that a warm instance heads the newest key once, not
   * on every pass. Sound because keys are never overwritten, and only keys still listed are looked up.
   */
  private readonly verified = new Map<string, ConfigHead>();
  /**
   * Keys whose metadata verifies but whose body does not (publish reads a body before it takes a
   * config ahead of the live cluster as a regression): skipped like keys that do not verify.
   */
  private readonly rejected = new Map<string, string>();
  /** The newest config's key as the last publish saw or left it, verified (see list). */
  private newestKey: string | null = null;
  /** How many configs the store holds, as far as this store object saw: an over-count only prunes sooner. */
  private known = 0;

  constructor(private readonly objects: ConfigObjects) {}

  /** How many configs the store holds, as far as this publisher saw. */
  get count(): number {
    return this.known;
  }

  /**
   * The newest entry trusted by name whose object verifies, walking down from the greatest key. A
   * key that is not (far ahead, gone, hand-made, forged) is skipped and reported; a store that
   * fails is an error. `anchor`: a key verified before, which stands for the history before it.
   */
  async find(
    configs: readonly ConfigEntry[],
    anchor?: string,
  ): Promise<{ entry: ConfigEntry | null; head: ConfigHead | null; skipped: SkippedKey[] }> {
    const skipped: SkippedKey[] = [];
    const at = anchor === undefined ? -1 : configs.findIndex((e) => e.key === anchor);
    const verdicts = judgeKeys(
      configs.map((e) => e.name),
      at < 0 ? undefined : at,
    );
    for (let i = configs.length - 1; i >= 0; i--) {
      const entry = configs[i]!;
      const distrusted = verdicts[i] ?? this.rejected.get(entry.key);
      if (distrusted !== undefined) {
        skipped.push({ key: entry.key, reason: distrusted });
        continue;
      }
      try {
        const head = this.verified.get(entry.key) ?? (await this.objects.head(entry.key, entry.name));
        this.remember(head);
        return { entry, head, skipped };
      } catch (err) {
        if (!(err instanceof StoreError) || err.transient) throw err;
        skipped.push({ key: entry.key, reason: err.message });
      }
    }
    return { entry: null, head: null, skipped };
  }

  private remember(head: ConfigHead): void {
    this.verified.delete(head.key);
    this.verified.set(head.key, head);
    if (this.verified.size > VERIFIED_KEPT) this.verified.delete(this.verified.keys().next().value!);
  }

  /** A key whose body does not verify: skipped from now on, like keys whose metadata does not. */
  reject(key: string, reason: string): void {
    // No longer an anchor to list from (list): the history below it decides.
    this.verified.delete(key);
    this.rejected.set(key, reason);
    if (this.rejected.size > REJECTED_KEPT) this.rejected.delete(this.rejected.keys().next().value!);
  }

  /** A publish found this newest config (null: none). */
  saw(head: ConfigHead | null): void {
    this.newestKey = head?.key ?? null;
  }

  /** A publish wrote this config: the newest now, one more in the store. */
  wrote(head: ConfigHead): void {
    this.remember(head);
    this.newestKey = head.key;
    this.known++;
  }

  /** A prune left this many configs. */
  pruned(left: number): void {
    this.known = left;
  }

  /**
   * The configs a publish decides from: the newest one it last saw or left and every key after it
   * (ListObjectsV2 StartAfter), not the whole retained history: a store that reads each object's
   * metadata to list it (s3rver) reads one or two (BENCHMARKS.md). The same newest as a
   * full listing: a key in the current format is fixed-width, so every key newer in decision order
   * sorts after it as a string — epochs, revisions and seqs are zero-padded, and the first
   * format's keys (`<revision>-<sha>.cfg`, epoch 0) sort after every epoch-0 key of this one and
   * before every later epoch. Hence only from a key of the current format: from a first-format
   * key, newer current-format keys of epoch 0 would sort before it. The listing starts just before
   * that key, so it is in the answer when it still exists; when it is not (deleted, a store put
   * back), the whole history is listed. That key, verified, is the anchor the keys after it are
   * judged from (core/publish/key-trust.ts).
   */
  async list(): Promise<{ configs: ConfigEntry[]; anchor?: string }> {
    const from = this.newestKey;
    if (from !== null && this.verified.has(from) && this.objects.parseKey(from)?.legacy === false) {
      const startAfter = from.slice(0, -1);
      const after = await this.objects.list(startAfter);
      if (after.some((e) => e.key === from)) {
        // A store that ignores StartAfter answers with the whole history: then that is the count.
        this.known = after.some((e) => e.key <= startAfter) ? after.length : this.known + after.length - 1;
        return { configs: after, anchor: from };
      }
    }
    const all = await this.objects.list();
    this.known = all.length;
    return { configs: all };
  }
}
