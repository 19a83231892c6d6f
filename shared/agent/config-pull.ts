/*
 * One pull of the pull loop (pull-loop.ts): which config to take and from where. A key a ping
 * named is fetched by one GET; a poll that newest.json says found nothing new ends there, without
 * a listing; else the store is listed and its newest trusted config that verifies is fetched. A
 * pin or rollout.json names exactly one config instead (pull-target.ts), older or newer, and one
 * that cannot be read holds the node where it is.
 *
 * - Newest wins, never older: a config is taken only if its key sorts after the running one's
 *   (in decision order, core/publish/config-key.ts), unless a pin names it, or the store no longer trusts
 *   the running key (see pull-target.ts).
 *   A key named by a ping is only a hint: when it cannot be fetched (or its digest differs from
 *   the ping's), the store is listed as without a ping, and nothing is recorded against that key.
 * - A failed config is retried only when a newer one appears or its backoff expires.
 */

import type { Logger } from "../adapters/log.js";
import { type ObjectStore, type Pin, type SkippedKey, StoreError, type StoredConfig } from "../adapters/store.js";
import type { Backoff } from "../core/backoff.js";
import { errorMessage } from "../core/error-message.js";
import { compareConfigKeys } from "../core/publish/config-key.js";
import type { ApplySteps } from "./apply-steps.js";
import type { NodeState } from "./node-state.js";
import type { AgentMetrics } from "./metrics.js";
import type { PullStages, PullVia, StepOutcome } from "./pull-stages.js";
import {
  newestVerifiedAfter,
  type PinRecord,
  PullError,
  readPin,
  readRolloutTarget,
  type RolloutTarget,
  SkippedKeys,
} from "./pull-target.js";

/** A pull lists the store at least this often, whatever newest.json says. */
const LISTING_EVERY = 10;

export interface ConfigPullOptions {
  store: Pick<ObjectStore, "history" | "get" | "getPin" | "getNewestHint"> & Partial<Pick<ObjectStore, "getRollout">>;
  /** `--canary`: this node's name, by which each pull finds what rollout.json has it run. */
  canaryNode?: string;
  /** Wait before retrying a failed config; a skipped key is looked at again after it too. */
  backoff: Backoff;
  metrics: AgentMetrics;
  log: Logger;
}

export interface ConfigPullParts {
  node: NodeState;
  steps: ApplySteps;
  /** The loop has stopped: nothing more is taken. */
  stopped(): boolean;
  /** Takes a config a pull found: the stage as the composition root may have wrapped it. */
  take: PullStages["take"];
}

export class ConfigPull {
  /** The newest key an authenticated ping named, not yet looked at. */
  private hint: { key: string; sha256: string } | null = null;
  /** Pulls since the last listing that newest.json ended (newestIsRunning). */
  private pullsUnlisted = 0;
  /** The pin of the last valid pin.json read (null: none, or none read yet); kept while pin.json is not a pin. */
  private pinnedNow: Pin | null = null;
  /** What rollout.json had this node run at the last pull (null: no rollout.json, or no --canary). */
  private rollout: { key: string; sha256: string; window: string | null } | null = null;
  private readonly skipped: SkippedKeys;
  private readonly node: NodeState;

  constructor(
    private readonly options: ConfigPullOptions,
    private readonly parts: ConfigPullParts,
  ) {
    this.node = parts.node;
    this.skipped = new SkippedKeys(options.backoff);
  }

  /** The pin the node runs under, if any. */
  get pinned(): Pin | null {
    return this.pinnedNow;
  }

  /** A pin or rollout.json names the one config this node runs: a newer one never supersedes it. */
  get held(): boolean {
    return this.pinnedNow !== null || this.rollout !== null;
  }

  /** The gate window of the rollout this node takes part in; null outside one. */
  get rolloutWindow(): string | null {
    return this.rollout?.window ?? null;
  }

  /** The newest keys skipped because they could not be trusted. */
  skippedKeys(): ReturnType<SkippedKeys["list"]> {
    return this.skipped.list();
  }

  /** A ping named `key` with its digest: fetched directly at the next pull if it is the newest named. */
  offer(key: string, sha256: string): void {
    if (this.hint === null || compareConfigKeys(key, this.hint.key) > 0) this.hint = { key, sha256 };
  }

  /** HAProxy restarted on the file: a ping's key may now be older than what the store has. */
  forgetHint(): void {
    this.hint = null;
  }

  /**
   * The config a ping named, by one GET, if its key sorts after `afterKey`; undefined when there
   * is none or it cannot be had (the caller lists the store instead): a bogus or vanished key
   * in a ping costs one failed GET, never a recorded failure or a backoff.
   */
  private async fetchHinted(afterKey: string | null): Promise<StoredConfig | undefined> {
    const hint = this.hint;
    this.hint = null;
    if (hint === null || (afterKey !== null && compareConfigKeys(hint.key, afterKey) <= 0)) return undefined;
    // The running config has no key (none yet, or a file on disk the agent cannot name): any key
    // could be older than it, so only the listing's newest decides.
    if (this.node.current?.key == null) return undefined;
    try {
      const config = await this.options.store.get(hint.key, { have: this.node.current?.text });
      if (config.sha256 !== hint.sha256)
        throw new Error(`its digest is ${config.sha256}, the ping said ${hint.sha256}`);
      this.options.metrics.notifiedPulls.inc({ result: "fetched" });
      return config;
    } catch (err) {
      this.options.metrics.notifiedPulls.inc({ result: "fallback" });
      this.options.log.warn(
        { key: hint.key, err: errorMessage(err) },
        "cannot fetch the config a ping named; listing the store instead",
      );
      return undefined;
    }
  }

  /** One pull; `dropped` when runtime changes newer than the file were dropped (the loop pulls again). */
  async pull(): Promise<StepOutcome> {
    const { store, metrics, log } = this.options;
    const afterKey = this.node.afterKey();
    const stopTimer = metrics.pullSeconds.startTimer();
    const failed = async (stage: "pull" | "verify", key: string | null, text: string): Promise<StepOutcome> => {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      await this.node.fail(stage, key, text);
      return "done";
    };
    let record: PinRecord;
    let hinted: StoredConfig | undefined;
    let rollout: RolloutTarget;
    // A ping says something changed: if its key cannot be had, the store is listed, not hinted at.
    const pinged = this.hint !== null;
    const canaryNode = this.options.canaryNode;
    try {
      [record, hinted, rollout] = await Promise.all([
        readPin(store),
        this.fetchHinted(afterKey),
        canaryNode === undefined || store.getRollout === undefined
          ? { target: null }
          : readRolloutTarget({ getRollout: () => store.getRollout!() }, canaryNode),
      ]);
    } catch (err) {
      return failed("pull", null, `cannot read the store: ${errorMessage(err)}`);
    }
    if ("unreadable" in record) return this.holdOnUnreadablePin(record.unreadable, stopTimer);
    const { pin } = record;
    if (pin?.key !== this.pinnedNow?.key)
      log.warn(
        { pinned: pin?.key ?? null, was: this.pinnedNow?.key ?? null },
        pin ? "pinned: running this config until unpinned" : "unpinned: following the newest config",
      );
    this.pinnedNow = pin;
    if (pin) return this.pullPinned(pin, stopTimer);
    // A canary rollout names the one config this node runs (pull-target.ts); a bad record holds it.
    if ("unreadable" in rollout) return this.holdOnUnreadablePin(rollout.unreadable, stopTimer, "rollout.json");
    this.rollout = rollout.target;
    metrics.rolloutWave.set(rollout.target?.wave ?? 0);
    metrics.rolloutCandidate.set(rollout.target?.candidate ? 1 : 0);
    if (rollout.target) return this.pullPinned(rollout.target, stopTimer, "the config rollout.json names");
    if (hinted) {
      metrics.pulls.inc({ result: "new" });
      stopTimer();
      return this.taken(hinted, "ping");
    }
    if (!pinged && (await this.newestIsRunning(afterKey))) return this.nothingNew(stopTimer);
    // Keys at or before the running one no longer matter to anyone.
    if (afterKey !== null) this.skipped.forgetUpTo(afterKey);
    let config: StoredConfig | null;
    let runningDistrusted = false;
    const skips: SkippedKey[] = [];
    try {
      const running = this.node.current?.key ?? null;
      const pulled = await newestVerifiedAfter(
        store,
        [running, afterKey],
        this.skipped,
        (key, reason) => skips.push({ key, reason }),
        this.node.current?.text,
      );
      config = pulled.config;
      runningDistrusted = running !== null && pulled.distrusted.has(running);
    } catch (err) {
      const key = err instanceof PullError ? err.key : null;
      return failed("pull", key, key === null ? `cannot read the store: ${errorMessage(err)}` : errorMessage(err));
    } finally {
      for (const { key, reason } of skips) {
        metrics.skippedConfigs.inc();
        await this.node.fail("verify", key, `skipped: ${reason}`);
      }
    }
    if (!config) return this.nothingNew(stopTimer);
    metrics.pulls.inc({ result: "new" });
    stopTimer();
    return this.taken(config, "list", runningDistrusted);
  }

  /** Hands a config to the take stage; a stale one is nothing to do. */
  private async taken(config: StoredConfig, via: PullVia, runningDistrusted = false): Promise<StepOutcome> {
    const outcome = await this.parts.take(config, via, runningDistrusted);
    return outcome === "stale" ? "done" : outcome;
  }

  /**
   * Whether newest.json names `afterKey` itself (what runs, or a newer config still backing off):
   * the poll then ends in that one small GET instead of a listing. Only a hint (anyone who can
   * write the store can write it): any other key it names, older or newer, is a listing, which
   * judges keys (a running key the store does not trust is found there), and every
   * LISTING_EVERY-th pull lists all the same, so a stale or forged hint delays a node that no ping
   * reaches by that many polls at most.
   */
  private async newestIsRunning(afterKey: string | null): Promise<boolean> {
    if (afterKey === null || this.node.current?.key == null) return false;
    if (++this.pullsUnlisted >= LISTING_EVERY) {
      this.pullsUnlisted = 0;
      return false;
    }
    const hint = await this.options.store.getNewestHint().catch(() => null);
    return hint?.key === afterKey;
  }

  /** `holding`: pin.json or rollout.json is not a record, an error that stands (holdOnUnreadablePin). */
  private async nothingNew(stopTimer: () => void, holding = false): Promise<StepOutcome> {
    stopTimer();
    this.options.metrics.pulls.inc({ result: "none" });
    const outcome = this.node.liveUnknown ? await this.parts.steps.reloadFromDisk() : "done";
    if (holding) return outcome;
    // Nothing newer and nothing failed backing off: an error of an earlier pull no longer stands,
    // unless it is a key still skipped.
    const last = this.node.lastError;
    const stillSkipped = last?.stage === "verify" && last.key !== null && this.skipped.has(last.key);
    if (!this.node.failed && last && !stillSkipped) await this.node.recordError(null);
    return outcome;
  }

  /**
   * pin.json is there but is not a pin (not JSON, another schema): someone meant to pin, and which
   * config is unknown, so the node does not move on its own. It keeps running the last pin it read,
   * or, without one (it followed the newest, or it started while pin.json was like this), the
   * config it runs; and it says so at every pull until pin.json is a pin again or is removed.
   */
  private async holdOnUnreadablePin(reason: string, stopTimer: () => void, file = "pin.json"): Promise<StepOutcome> {
    const { metrics, log } = this.options;
    const held = file === "pin.json" ? this.pinnedNow : this.rollout;
    const running = this.node.current?.key ?? null;
    const what = file === "pin.json" ? "pin.json is not a pin" : `${file} is not a rollout record`;
    const text = `${what} (${reason}): holding at ${held ? `the last ${file === "pin.json" ? "pin" : "config it named"}, ${held.key}` : `the config it runs, ${running ?? "none yet"}`} until ${file} is ${file === "pin.json" ? "a pin" : "a record"} again or is removed`;
    log.error({ reason, holding: held?.key ?? running, pinned: held !== null }, text);
    let outcome: StepOutcome = "done";
    if (held)
      outcome = await this.pullPinned(
        held,
        stopTimer,
        file === "pin.json" ? "pinned config" : "the config rollout.json named",
        true,
      );
    else {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      // What runs is restored, never moved: after a failed undo, the file's config again.
      if (this.node.liveUnknown) outcome = await this.parts.steps.reloadFromDisk();
    }
    // Last, over whatever the pinned config's pull recorded: the pin is what needs fixing first.
    await this.node.recordError({ stage: "pull", key: held?.key ?? null, message: text, at: new Date().toISOString() });
    return outcome;
  }

  /** A pin is set (or rollout.json names one): run exactly that config, older or newer than the running one. */
  private async pullPinned(
    pin: Pick<Pin, "key" | "sha256">,
    stopTimer: () => void,
    what = "pinned config",
    holding = false,
  ): Promise<StepOutcome> {
    const { store, metrics } = this.options;
    const backingOff = this.node.status().backoff?.key === pin.key;
    if ((this.node.current?.key === pin.key && !this.node.liveUnknown) || backingOff)
      return this.nothingNew(stopTimer, holding);
    let config: StoredConfig;
    try {
      config = await store.get(pin.key, { have: this.node.current?.text });
      if (config.sha256 !== pin.sha256)
        throw new StoreError(
          what === "pinned config"
            ? `the pinned config's digest is ${config.sha256}, the pin says ${pin.sha256}`
            : `its digest is ${config.sha256}, rollout.json says ${pin.sha256}`,
          {
            transient: false,
          },
        );
    } catch (err) {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      const corrupt = !(err instanceof StoreError) || !err.transient;
      await this.node.fail(corrupt ? "verify" : "pull", pin.key, `${what}: ${errorMessage(err)}`);
      return "done";
    }
    metrics.pulls.inc({ result: "new" });
    stopTimer();
    return this.taken(config, what === "pinned config" ? "pin" : "rollout");
  }

  /**
   * The take stage: applies `config` unless it is stale. `runningDistrusted`: the store no longer
   * trusts the running key, which therefore orders nothing.
   */
  async take(config: StoredConfig, runningDistrusted = false): Promise<StepOutcome | "stale"> {
    if (this.parts.stopped()) return "done";
    // Newest wins, never older (docs/design.md#invariant-1-the-latest-decision-wins), whatever path
    // brought the config here; a pin names exactly one.
    const runningKey = this.node.current?.key ?? null;
    const pinned = this.pinnedNow?.key ?? this.rollout?.key;
    if (
      pinned !== undefined
        ? config.key !== pinned
        : runningKey !== null && !runningDistrusted && compareConfigKeys(config.key, runningKey) <= 0
    )
      return "stale";
    // Same bytes under a newer key (e.g. the unknown file on disk after a crash): nothing to apply.
    if (config.sha256 === this.node.current?.sha256 && !this.node.liveUnknown) {
      await this.parts.steps.applied(config, "unchanged", performance.now());
      return "done";
    }
    return this.parts.steps.apply(config);
  }
}
