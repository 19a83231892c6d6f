/*
 * Which config the agent pulls: the pinned one while a pin is set (`servicelb pin`), else the
 * newest config after the running one that is trusted by name and whose object verifies; with
 * `--canary`, the config rollout.json names for this node while there is one. A
 * pin.json that is not a pin never moves the node (pull-loop.ts holds it). Keys are not trusted
 * blindly: a key that leads the one before it too far (core/publish/key-trust.ts: a forged far-future
 * key), or whose object is missing or does not verify (a hand upload), is skipped and reported,
 * and the next one down is taken, so that one bad key never freezes the node.
 */

import { StoreError, type ObjectStore, type Pin, type SkippedKey, type StoredConfig } from "../adapters/store.js";
import { type Backoff, backoffDelay } from "../core/backoff.js";
import { compareConfigKeys } from "../core/publish/config-key.js";
import { errorMessage } from "../core/error-message.js";
import { rolloutTarget, waveOfNode, windowOf } from "../core/rollout/rollout-record.js";

/** Keys that did not verify: not fetched again until their retry time (a bad read may pass later). */
export class SkippedKeys {
  private readonly byKey = new Map<string, { reason: string; attempts: number; retryAt: number }>();

  constructor(private readonly backoff: Backoff) {}

  add(key: string, reason: string): void {
    const attempts = (this.byKey.get(key)?.attempts ?? 0) + 1;
    this.byKey.set(key, {
      reason,
      attempts,
      retryAt: Date.now() + backoffDelay(this.backoff, attempts),
    });
  }

  /** Skipped and not yet due for another look. */
  holds(key: string): boolean {
    const entry = this.byKey.get(key);
    return entry !== undefined && Date.now() < entry.retryAt;
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** Keys older than `key` no longer matter to anyone: forgotten. */
  forgetUpTo(key: string): void {
    for (const k of this.byKey.keys()) if (compareConfigKeys(k, key) <= 0) this.byKey.delete(k);
  }

  list(): SkippedKey[] {
    return [...this.byKey].map(([key, { reason }]) => ({ key, reason }));
  }
}

/** The store failed while a config was being fetched: `key` names it (null: the listing failed). */
export class PullError extends Error {
  override readonly name = "PullError";
  constructor(
    readonly key: string | null,
    cause: unknown,
  ) {
    super(errorMessage(cause), { cause });
  }
}

/**
 * The newest config that is trusted, whose object verifies, and that sorts after the greatest of
 * `afterKeys` the store still trusts; null when there is none. A key of `afterKeys` the listing
 * does not trust is returned in `distrusted`: a node that ran a far-ahead key (taken before
 * servicelb judged keys) would otherwise wait behind it for good. A store failure (transient, or
 * anything but a config that does not verify) is thrown as a PullError.
 */
export async function newestVerifiedAfter(
  store: Pick<ObjectStore, "history" | "get">,
  afterKeys: readonly (string | null)[],
  skipped: SkippedKeys,
  onSkip: (key: string, reason: string) => void,
  have?: string,
): Promise<{ config: StoredConfig | null; distrusted: ReadonlySet<string> }> {
  const entries = await store.history().catch((err: unknown) => {
    throw new PullError(null, err);
  });
  const distrusted = new Set(
    entries.filter((e) => e.untrusted !== undefined && afterKeys.includes(e.key)).map((e) => e.key),
  );
  let after: string | null = null;
  for (const k of afterKeys)
    if (k !== null && !distrusted.has(k) && (after === null || compareConfigKeys(k, after) > 0)) after = k;
  for (const entry of entries) {
    if (after !== null && compareConfigKeys(entry.key, after) <= 0) return { config: null, distrusted };
    if (skipped.holds(entry.key)) continue;
    if (entry.untrusted !== undefined) {
      skipped.add(entry.key, entry.untrusted);
      onSkip(entry.key, entry.untrusted);
      continue;
    }
    try {
      return { config: await store.get(entry.key, { have }), distrusted };
    } catch (err) {
      if (!(err instanceof StoreError) || err.transient) throw new PullError(entry.key, err);
      skipped.add(entry.key, err.message);
      onSkip(entry.key, err.message);
    }
  }
  return { config: null, distrusted };
}

/** What pin.json says: a pin, no pin (there is no pin.json), or why it is not a pin. */
export type PinRecord = { readonly pin: Pin | null } | { readonly unreadable: string };

/** pin.json, read; a store that fails to serve it throws. */
export async function readPin(store: Pick<ObjectStore, "getPin">): Promise<PinRecord> {
  try {
    return { pin: await store.getPin() };
  } catch (err) {
    if (!(err instanceof StoreError) || err.transient) throw err;
    return { unreadable: err.message };
  }
}

/**
 * What rollout.json has this node run (docs/design.md#canary-rollouts): the candidate while the
 * node is in an admitted wave, else the stable config, with the gate window its counters are for;
 * null when there is no rollout.json (the node follows the newest config). A rollout.json that is
 * not a record is returned as `unreadable`, as a bad pin.json is: the node then holds.
 */
export type RolloutTarget =
  | {
      readonly target: {
        key: string;
        sha256: string;
        window: string | null;
        /** The wave that admits this node (1: the canary), null outside a rollout or its order. */
        wave: number | null;
        /** Whether the config named is the rollout's candidate (else the stable one). */
        candidate: boolean;
      } | null;
    }
  | { readonly unreadable: string };

export async function readRolloutTarget(store: Pick<ObjectStore, "getRollout">, node: string): Promise<RolloutTarget> {
  try {
    const record = await store.getRollout();
    if (record === null) return { target: null };
    const { key, sha256 } = rolloutTarget(record, node);
    const r = record.rollout;
    return {
      target: {
        key,
        sha256,
        window: r ? windowOf(r) : null,
        wave: r ? waveOfNode(r, node) : null,
        candidate: r !== null && key === r.candidate.key && sha256 === r.candidate.sha256,
      },
    };
  } catch (err) {
    if (!(err instanceof StoreError) || err.transient) throw err;
    return { unreadable: err.message };
  }
}
