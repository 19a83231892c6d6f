/*
 * Brings HAProxy to the newest published config: the pull loop. Each pass fetches the key a ping
 * named (one GET) or lists the store and GETs its newest (its digest verified by the store), then
 * hands the config to the apply steps (apply-steps.ts; decide.ts says runtime API or reload). A
 * poll that newest.json tells nothing changed ends there, without a listing.
 *
 * - Newest wins, never older: a config is taken only if its key sorts after the running one's
 *   (in decision order, core/publish/config-key.ts), unless a pin names it, or the store no longer trusts
 *   the running key (see pull-target.ts).
 *   A key named by a ping is only a hint: when it cannot be fetched (or its digest differs from
 *   the ping's), the store is listed as without a ping, and nothing is recorded against that key.
 * - A failed config is retried only when a newer one appears or its backoff expires.
 * - At most one pull in flight; requests during it fold into one more pull after it.
 * - After HAProxy restarts on its own it runs the file: unchecked runtime changes are dropped
 *   and the newest config is applied again from the file's.
 */

import { StoreError, type ObjectStore, type Pin, type SkippedKey, type StoredConfig } from "../adapters/store.js";
import { NO_TRACE, type StageTrace } from "../adapters/stage-trace.js";
import { compareConfigKeys } from "../core/publish/config-key.js";
import { ApplySteps, type ApplyStepsOptions, type StepOutcome } from "./apply-steps.js";
import { NodeState, type PullLoopStatus, type KnownConfig, type NodeStateOptions } from "./node-state.js";
import {
  newestVerifiedAfter,
  type PinRecord,
  PullError,
  readPin,
  readRolloutTarget,
  type RolloutTarget,
  SkippedKeys,
} from "./pull-target.js";
import { errorMessage } from "../core/error-message.js";

export type { PullLoopStatus } from "./node-state.js";
export type { HaproxyControl, RuntimePort } from "./apply-steps.js";

export interface PullLoopOptions extends NodeStateOptions, ApplyStepsOptions {
  store: Pick<ObjectStore, "history" | "get" | "getPin" | "getNewestHint"> & Partial<Pick<ObjectStore, "getRollout">>;
  /** `--canary`: this node's name, by which each pull finds what rollout.json has it run. */
  canaryNode?: string;
}

/** A pull lists the store at least this often, whatever newest.json says. */
const LISTING_EVERY = 10;

export class PullLoop {
  private readonly node: NodeState;
  private readonly steps: ApplySteps;
  /** The newest key an authenticated ping named, not yet looked at. */
  private hint: { key: string; sha256: string } | null = null;
  /** Pulls since the last listing that newest.json ended (newestIsRunning). */
  private pullsUnlisted = 0;
  private inFlight: Promise<void> | undefined;
  private pending = false;
  private stopped = false;
  /** HAProxy was restarted by its supervisor on this file text (null: unknown); acted on in the loop. */
  private restarted: { text: string | null } | null = null;
  private readonly abort = new AbortController();
  /** The pin of the last valid pin.json read (null: none, or none read yet); kept while pin.json is not a pin. */
  private pinned: Pin | null = null;
  /** What rollout.json had this node run at the last pull (null: no rollout.json, or no --canary). */
  private rollout: { key: string; sha256: string; window: string | null } | null = null;
  private readonly skipped: SkippedKeys;
  private readonly trace: StageTrace;

  constructor(private readonly options: PullLoopOptions) {
    this.trace = options.trace ?? NO_TRACE;
    this.node = new NodeState(options);
    this.skipped = new SkippedKeys(options.backoff);
    this.steps = new ApplySteps(options, this.node, {
      stopped: () => this.stopped,
      pullRequested: () => this.pending,
      pinned: () => this.pinned !== null || this.rollout !== null,
      signal: this.abort.signal,
    });
  }

  /** HAProxy was started and runs a config the agent applied. */
  get serving(): boolean {
    return this.node.started && this.node.current !== null;
  }

  /** The config HAProxy serves, runtime changes included; null until it serves one. */
  get running(): KnownConfig | null {
    return this.serving ? this.node.current : null;
  }

  status(): PullLoopStatus {
    return {
      ...this.node.status(),
      pinned: this.pinned && { key: this.pinned.key, pinnedAt: this.pinned.pinnedAt },
      skipped: this.skipped.list(),
    };
  }

  /** The gate window of the rollout this node takes part in (docs/design.md#canary-rollouts); null outside one. */
  get rolloutWindow(): string | null {
    return this.rollout?.window ?? null;
  }

  /** Key of the running config, if known. */
  get appliedKey(): string | null {
    return this.node.current?.key ?? null;
  }

  /**
   * Look for a newer config and apply it. Coalescing: while a pull runs, any number of calls
   * cause exactly one more pull after it. Never rejects: outcomes are in status().
   */
  sync(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.pending = true;
    return this.run();
  }

  /** Runs the loop unless it runs already (it looks at `pending` again before it ends). */
  private run(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    this.inFlight = this.drain().finally(() => {
      this.inFlight = undefined;
      // Asked for between the loop's last look and here (a microtask): run again.
      if (!this.stopped && (this.pending || this.restarted)) void this.run();
    });
    return this.inFlight;
  }

  /**
   * A ping named `key` (with its digest): pull unless that config (or a newer one) already runs.
   * The key is fetched directly, without listing the store, if it sorts after the running one.
   * Returns at once.
   */
  notify(key: string, sha256?: string): "pulling" | "current" {
    this.trace("notify", { key, busy: this.inFlight !== undefined && this.pulling });
    if (this.node.current?.key && compareConfigKeys(key, this.node.current.key) <= 0) return "current";
    if (sha256 !== undefined && (this.hint === null || compareConfigKeys(key, this.hint.key) > 0))
      this.hint = { key, sha256 };
    void this.sync();
    return "pulling";
  }

  /**
   * HAProxy was restarted after dying on its own: it runs the file (`fileText`, read when it was
   * started), not runtime changes made to the dead one after the file was last written. The
   * newest config is applied again from what runs.
   */
  haproxyRestarted(fileText: string | null): void {
    if (this.stopped || !this.node.started) return;
    this.restarted = { text: fileText };
    void this.sync();
  }

  /**
   * Refuses new work at once (pings, polls, a restart), kills a `haproxy -c` in flight and waits
   * only for the step in progress. An abandoned check leaves the file at the last config that
   * passed; the next start pulls the newest again.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.restarted = null;
    while (this.inFlight) await this.inFlight;
  }

  /** True while a pull or an apply runs. */
  private pulling = false;

  /** Pulls while asked to. */
  private async drain(): Promise<void> {
    for (;;) {
      if (this.restarted && !this.stopped) {
        const { text } = this.restarted;
        this.restarted = null;
        this.resetAfterRestart(text);
      }
      if (this.pending && !this.stopped) {
        this.pending = false;
        this.pulling = true;
        try {
          await this.cycle();
          await this.steps.ensureStarted();
        } catch (err) {
          // Every expected failure is recorded where it happens; this is a bug, but the loop must go on.
          this.options.log.error({ err }, "unexpected error while applying a config");
        } finally {
          this.pulling = false;
        }
        continue;
      }
      return;
    }
  }

  private resetAfterRestart(fileText: string | null): void {
    const dropped = this.node.restartedOn(fileText);
    this.options.log.warn(
      { running: this.node.current?.key ?? null, dropped },
      "HAProxy was restarted on the config file: applying the newest config again from it",
    );
    // A ping's key may now be older than what the store has: list the store afresh.
    this.hint = null;
    this.pending = true;
  }

  /** Runtime changes newer than the file were dropped: the newest config is pulled again. */
  private after(outcome: StepOutcome): void {
    if (outcome === "dropped") this.pending = true;
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

  private async cycle(): Promise<void> {
    const { store, metrics, log } = this.options;
    const afterKey = this.node.afterKey();
    const stopTimer = metrics.pullSeconds.startTimer();
    this.trace("pull.start");
    const failed = (stage: "pull" | "verify", key: string | null, text: string) => {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      return this.node.fail(stage, key, text);
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
    if (pin?.key !== this.pinned?.key)
      log.warn(
        { pinned: pin?.key ?? null, was: this.pinned?.key ?? null },
        pin ? "pinned: running this config until unpinned" : "unpinned: following the newest config",
      );
    this.pinned = pin;
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
      this.trace("pull.end", { key: hinted.key, via: "ping" });
      return this.take(hinted);
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
    this.trace("pull.end", { key: config.key, via: "list" });
    return this.take(config, runningDistrusted);
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
  private async nothingNew(stopTimer: () => void, holding = false): Promise<void> {
    stopTimer();
    this.options.metrics.pulls.inc({ result: "none" });
    if (this.node.liveUnknown) this.after(await this.steps.reloadFromDisk());
    if (holding) return;
    // Nothing newer and nothing failed backing off: an error of an earlier pull no longer stands,
    // unless it is a key still skipped.
    const last = this.node.lastError;
    const stillSkipped = last?.stage === "verify" && last.key !== null && this.skipped.has(last.key);
    if (!this.node.failed && last && !stillSkipped) await this.node.recordError(null);
  }

  /**
   * pin.json is there but is not a pin (not JSON, another schema): someone meant to pin, and which
   * config is unknown, so the node does not move on its own. It keeps running the last pin it read,
   * or, without one (it followed the newest, or it started while pin.json was like this), the
   * config it runs; and it says so at every pull until pin.json is a pin again or is removed.
   */
  private async holdOnUnreadablePin(reason: string, stopTimer: () => void, file = "pin.json"): Promise<void> {
    const { metrics, log } = this.options;
    const held = file === "pin.json" ? this.pinned : this.rollout;
    const running = this.node.current?.key ?? null;
    const what = file === "pin.json" ? "pin.json is not a pin" : `${file} is not a rollout record`;
    const text = `${what} (${reason}): holding at ${held ? `the last ${file === "pin.json" ? "pin" : "config it named"}, ${held.key}` : `the config it runs, ${running ?? "none yet"}`} until ${file} is ${file === "pin.json" ? "a pin" : "a record"} again or is removed`;
    log.error({ reason, holding: held?.key ?? running, pinned: held !== null }, text);
    if (held)
      await this.pullPinned(
        held,
        stopTimer,
        file === "pin.json" ? "pinned config" : "the config rollout.json named",
        true,
      );
    else {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      // What runs is restored, never moved: after a failed undo, the file's config again.
      if (this.node.liveUnknown) this.after(await this.steps.reloadFromDisk());
    }
    // Last, over whatever the pinned config's pull recorded: the pin is what needs fixing first.
    await this.node.recordError({ stage: "pull", key: held?.key ?? null, message: text, at: new Date().toISOString() });
  }

  /** A pin is set (or rollout.json names one): run exactly that config, older or newer than the running one. */
  private async pullPinned(
    pin: Pick<Pin, "key" | "sha256">,
    stopTimer: () => void,
    what = "pinned config",
    holding = false,
  ): Promise<void> {
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
      return this.node.fail(corrupt ? "verify" : "pull", pin.key, `${what}: ${errorMessage(err)}`);
    }
    metrics.pulls.inc({ result: "new" });
    stopTimer();
    this.trace("pull.end", { key: config.key, via: what === "pinned config" ? "pin" : "rollout" });
    return this.take(config);
  }

  /** `runningDistrusted`: the store no longer trusts the running key, which therefore orders nothing. */
  private async take(config: StoredConfig, runningDistrusted = false): Promise<void> {
    if (this.stopped) return;
    // Newest wins, never older (docs/design.md#invariant-1-the-latest-decision-wins), whatever path
    // brought the config here; a pin names exactly one.
    const runningKey = this.node.current?.key ?? null;
    const pinned = this.pinned?.key ?? this.rollout?.key;
    if (
      pinned !== undefined
        ? config.key !== pinned
        : runningKey !== null && !runningDistrusted && compareConfigKeys(config.key, runningKey) <= 0
    ) {
      this.trace("take.stale", { key: config.key, running: runningKey });
      return;
    }
    // Same bytes under a newer key (e.g. the unknown file on disk after a crash): nothing to apply.
    if (config.sha256 === this.node.current?.sha256 && !this.node.liveUnknown)
      return this.node.succeed(config, "unchanged", performance.now());
    this.after(await this.steps.apply(config));
  }
}
