import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { RuntimeCommand } from "../core/runtime-plan.js";
import { decideApply } from "./decide.js";
import { configVerdict, type CheckVerdict, type ConfigChecker } from "./verdict.js";
import { checkConfig } from "../adapters/haproxy/check.js";
import { sha256 } from "../core/sha256.js";
import type { ReloadResult } from "../adapters/haproxy/master.js";
import { runRuntimeCommand, showServersState } from "../adapters/haproxy/runtime.js";
import type { Logger } from "../adapters/log.js";
import { StoreError, type ObjectStore, type StoredConfig } from "../adapters/object-store.js";
import { serverStateFileOf, statsSocketOf } from "./config-facts.js";
import { NotDurableError, writeFileAtomic } from "./files.js";
import type { AgentMetrics } from "./metrics.js";
import { trace } from "../adapters/trace.js";
import { EMPTY_SERVER_STATE, serverStateFor } from "./server-state.js";
import { saveState, type AgentError, type AgentState, type AppliedConfig } from "./state.js";

/**
 * Brings HAProxy to the newest published config, one step at a time:
 * fetch (the key a ping named: one GET; else list the store, then GET; sha256 verified by the
 * store) → runtime API when only server slots changed, else `haproxy -c` → atomic write →
 * reload through the master socket, confirmed by `show proc`.
 *
 * - Newest wins, never older: a config is taken only if its key sorts after the running one's.
 *   A key named by a ping is only a hint: when it cannot be fetched (or its sha256 differs from
 *   the ping's), the store is listed as without a ping, and nothing is recorded against that key.
 * - Never lose the last good config (invariant 3): nothing reaches haproxy.cfg before it passed
 *   `haproxy -c`, and when a reload or start fails the previous file is put back, so that the
 *   file always describes a config that passed and a later reload or restart cannot pick up a
 *   failure. (Endpoint-only changes go live before the check: see applyThroughRuntime.)
 * - A failed config is retried only when a newer one appears or its backoff expires.
 * - At most one pull in flight; requests during it fold into one more pull after it. The check
 *   of an endpoint-only change runs in the background: a following change is pulled and applied
 *   meanwhile, and the check of the newest live config follows (see validate()).
 * - Reloads are at least minReloadIntervalMs apart; a config waiting for its slot gives way to
 *   a newer one published meanwhile.
 */

/** What the applier needs of HAProxy; HaproxyProcess provides it. */
export interface HaproxyControl {
  readonly running: boolean;
  /** Starts HAProxy on the config file; resolves once it serves. */
  start(): Promise<void>;
  /** Reloads onto the config file; `ok: false` means the previous worker kept serving. */
  reload(): Promise<Pick<ReloadResult, "ok" | "reason">>;
}

export interface ApplierOptions {
  store: Pick<ObjectStore, "history" | "get">;
  haproxy: HaproxyControl;
  configPath: string;
  stateFile: string;
  haproxyBin: string;
  minReloadIntervalMs: number;
  /** Wait before retrying a failed config: initialMs, doubling up to maxMs. */
  backoff: { initialMs: number; maxMs: number };
  metrics: AgentMetrics;
  log: Logger;
  /** haproxy.cfg as found on disk at start (null: none), and the state saved beside it. */
  disk: string | null;
  saved: AgentState;
  /** Called after every applied config and every failure (e.g. to report status). */
  onChange?: () => void;
  /** HAProxy's ports, real by default; a test injects fakes to force an interleaving. */
  check?: ConfigChecker;
  runtime?: RuntimePort;
}

/** What the applier does on HAProxy's runtime API socket. */
export interface RuntimePort {
  run(socket: string, command: RuntimeCommand): Promise<void>;
  /** `show servers state`, as the server-state file takes it. */
  serversState(socket: string): Promise<string>;
}

const REAL_RUNTIME: RuntimePort = { run: runRuntimeCommand, serversState: showServersState };

interface Running {
  text: string;
  sha256: string;
  /** null: a config on disk the agent cannot name (see state.ts). */
  key: string | null;
  revision: string | null;
}

/** Endpoint-only changes live through the runtime API whose `haproxy -c` has not passed yet. */
interface Unvalidated {
  config: StoredConfig;
  /** When its pull ended (apply duration). */
  t0: number;
}

/** A background `haproxy -c` of a config already live through the runtime API. */
interface Validation {
  config: StoredConfig;
  t0: number;
  abort: AbortController;
  /** Settles (never rejects) with the check's verdict. */
  done: Promise<CheckVerdict>;
  settled: boolean;
  /** A structural config was written over it: its verdict no longer matters. */
  cancelled: boolean;
}


interface Failure {
  key: string;
  attempts: number;
  retryAt: number;
}

export interface ApplierStatus {
  /** The config HAProxy runs; null until HAProxy serves one. */
  applied: AppliedConfig | null;
  lastError: AgentError | null;
  /** A config that failed and waits for its retry (or for a newer one). */
  backoff: { key: string; attempts: number; retryAt: string } | null;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class Applier {
  /** What HAProxy runs (runtime API changes included); null until a config is known. */
  private current: Running | null = null;
  /** What haproxy.cfg holds: always a config that passed `haproxy -c` (or the file found at start). */
  private onDisk: Running | null = null;
  /** Newest config live through the runtime API but not yet checked and written. */
  private unvalidated: Unvalidated | null = null;
  private validation: Validation | null = null;
  /** The newest key an authenticated ping named, not yet looked at. */
  private hint: { key: string; sha256: string } | null = null;
  private wakers: Array<() => void> = [];
  private started = false;
  private state: AgentState;
  private failure: Failure | null = null;
  private lastReloadAt = -Infinity;
  private inFlight: Promise<void> | undefined;
  private pending = false;
  private stopped = false;
  /** HAProxy was restarted by its supervisor on this file text (null: unknown); acted on in the loop. */
  private restarted: { text: string | null } | null = null;
  /**
   * What the slots run is not known (undoing runtime changes failed and no reload has restored
   * the file's config yet): the next change goes through a reload, never a runtime diff.
   */
  private liveUnknown = false;
  /** The background check of the live runtime changes could not run: it is tried again then (see checkUnavailable). */
  private checkRetry: NodeJS.Timeout | undefined;
  private checkRetries = 0;
  private readonly abort = new AbortController();

  constructor(private readonly o: ApplierOptions) {
    let applied: AppliedConfig | null = null;
    if (o.disk !== null) {
      const sha = sha256(o.disk);
      const known = o.saved.applied?.sha256 === sha ? o.saved.applied : null;
      this.current = this.onDisk = { text: o.disk, sha256: sha, key: known?.key ?? null, revision: known?.revision ?? null };
      applied = known;
      if (!known) o.log.warn({ configPath: o.configPath, sha256: sha }, "the config on disk is not the one last recorded (stopped between write and record?): the newest published config decides");
    }
    // Nothing runs yet: "applied" becomes true once HAProxy serves (see status()).
    this.state = { applied, lastError: o.saved.lastError };
  }

  /** HAProxy was started and runs a config the agent applied. */
  get serving(): boolean {
    return this.started && this.current !== null;
  }

  status(): ApplierStatus {
    const f = this.failure;
    return {
      applied: this.started ? this.state.applied : null,
      lastError: this.state.lastError,
      backoff: f && Date.now() < f.retryAt ? { key: f.key, attempts: f.attempts, retryAt: new Date(f.retryAt).toISOString() } : null,
    };
  }

  /** Key of the running config, if known. */
  get appliedKey(): string | null {
    return this.current?.key ?? null;
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

  /** Runs the loop, or wakes it when it waits for a background check only. */
  private run(): Promise<void> {
    if (this.inFlight) {
      // The loop may be waiting for a background check only: wake it to pull now.
      for (const wake of this.wakers.splice(0)) wake();
      return this.inFlight;
    }
    this.inFlight = this.drain().finally(() => {
      this.inFlight = undefined;
      // Asked for between the loop's last look and here (a microtask): run again.
      if (!this.stopped && (this.pending || this.restarted)) void this.run();
    });
    return this.inFlight;
  }

  /**
   * A ping named `key` (with its sha256): pull unless that config (or a newer one) already runs.
   * The key is fetched directly, without listing the store, if it sorts after the running one.
   * Returns at once.
   */
  notify(key: string, sha256?: string): "pulling" | "current" {
    trace("agent", "notify", { key, busy: this.inFlight !== undefined && this.pulling });
    if (this.current?.key && key <= this.current.key) return "current";
    if (sha256 !== undefined && (this.hint === null || key > this.hint.key)) this.hint = { key, sha256 };
    void this.sync();
    return "pulling";
  }

  /**
   * HAProxy was restarted after dying on its own: it runs the file (`fileText`, read when it was
   * started), not the runtime changes made to the dead one. The unchecked ones are dropped (their
   * check is cancelled) and the newest config is applied again from what runs.
   */
  haproxyRestarted(fileText: string | null): void {
    if (this.stopped || !this.started) return;
    this.restarted = { text: fileText };
    void this.sync();
  }

  /**
   * Refuses new work at once (pings, polls, a restart), kills a check in flight (background or
   * not) and waits only for the step in progress. An abandoned check leaves the file at the last
   * checked config; the next start pulls the newest again.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.restarted = null;
    this.cancelValidation();
    for (const wake of this.wakers.splice(0)) wake();
    while (this.inFlight) await this.inFlight;
  }

  /** True while a pull or an apply runs (not merely a background check). */
  private pulling = false;

  /**
   * Pulls while asked to; between pulls, waits for the background check of the live runtime
   * changes, or for a new request, whichever comes first. On stop, a check in flight is
   * abandoned (see stop()).
   */
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
          await this.ensureStarted();
        } catch (err) {
          // Every expected failure is recorded where it happens; this is a bug, but the loop must go on.
          this.o.log.error({ err }, "unexpected error while applying a config");
        } finally {
          this.pulling = false;
        }
        continue;
      }
      const v = this.validation;
      if (!v || this.stopped) return;
      if (!v.settled) {
        await Promise.race([v.done, new Promise<void>((r) => this.wakers.push(r))]);
        continue;
      }
      try {
        await this.finishValidation(v);
      } catch (err) {
        this.o.log.error({ err }, "unexpected error while finishing a config check");
      }
    }
  }

  private resetAfterRestart(fileText: string | null): void {
    const dropped = this.unvalidated;
    this.cancelValidation();
    this.unvalidated = null;
    this.liveUnknown = false;
    const disk = this.onDisk;
    const sha = fileText === null ? null : sha256(fileText);
    // A file the agent did not record (it wrote it just before or after the restart read it): its key is unknown.
    this.current = fileText === null || sha === disk?.sha256 ? disk : { text: fileText, sha256: sha!, key: null, revision: null };
    this.o.log.warn({ running: this.current?.key ?? null, dropped: dropped?.config.key ?? null }, "HAProxy was restarted on the config file: applying the newest config again from it");
    // What failed while HAProxy was down (a reload with no master) must not wait out a backoff,
    // and a ping's key may now be older than what the store has: list the store afresh.
    this.failure = null;
    this.hint = null;
    this.pending = true;
  }

  /** A background check no longer matters (its config was replaced, or HAProxy lost it): kill it, or its retry. */
  private cancelValidation(): void {
    clearTimeout(this.checkRetry);
    this.checkRetry = undefined;
    this.checkRetries = 0;
    const v = this.validation;
    if (!v) return;
    v.cancelled = true;
    v.abort.abort();
    this.validation = null;
  }

  private backingOff(): boolean {
    return this.failure !== null && Date.now() < this.failure.retryAt;
  }

  /**
   * Only a key after this one may be taken: the running config's, or the failed one's while it
   * backs off when that is newer (invariant 1: a config running through the runtime API moves
   * `current` past a failure without clearing it, so the failure alone is not enough).
   */
  private afterKey(): string | null {
    const running = this.current?.key ?? null;
    const failed = this.backingOff() ? this.failure!.key : null;
    if (running === null) return failed;
    return failed !== null && failed > running ? failed : running;
  }

  /**
   * The config a ping named, by one GET, if its key sorts after `afterKey`; undefined when there
   * is none or it cannot be had (the caller lists the store instead): a bogus or vanished key
   * in a ping costs one failed GET, never a recorded failure or a backoff.
   */
  private async fetchHinted(afterKey: string | null): Promise<StoredConfig | undefined> {
    const hint = this.hint;
    this.hint = null;
    if (hint === null || (afterKey !== null && hint.key <= afterKey)) return undefined;
    // The running config has no key (none yet, or a file on disk the agent cannot name): any key
    // could be older than it, so only the listing's newest decides.
    if (this.current?.key == null) return undefined;
    try {
      const config = await this.o.store.get(hint.key);
      if (config.sha256 !== hint.sha256) throw new Error(`its sha256 is ${config.sha256}, the ping said ${hint.sha256}`);
      this.o.metrics.notifiedPulls.inc({ result: "fetched" });
      return config;
    } catch (err) {
      this.o.metrics.notifiedPulls.inc({ result: "fallback" });
      this.o.log.warn({ key: hint.key, err: message(err) }, "cannot fetch the config a ping named; listing the store instead");
      return undefined;
    }
  }

  private async cycle(): Promise<void> {
    const { store, metrics } = this.o;
    const afterKey = this.afterKey();
    const stopTimer = metrics.pullSeconds.startTimer();
    trace("agent", "pull.start");
    const hinted = await this.fetchHinted(afterKey);
    if (hinted) {
      metrics.pulls.inc({ result: "new" });
      stopTimer();
      trace("agent", "pull.end", { key: hinted.key, via: "ping" });
      return this.take(hinted);
    }
    let newest;
    try {
      [newest] = await store.history({ limit: 1 });
    } catch (err) {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      return this.fail("pull", null, `cannot list the store: ${message(err)}`);
    }
    if (!newest || (afterKey !== null && newest.key <= afterKey)) {
      stopTimer();
      metrics.pulls.inc({ result: "none" });
      if (this.liveUnknown) await this.reloadFromDisk();
      // A check that could not run (retried) still stands as the last error.
      if (!this.failure && this.checkRetries === 0 && this.state.lastError) await this.record({ ...this.state, lastError: null });
      return;
    }
    let config: StoredConfig;
    try {
      config = await store.get(newest.key);
    } catch (err) {
      stopTimer();
      metrics.pulls.inc({ result: "failed" });
      const corrupt = err instanceof StoreError && !err.transient;
      return this.fail(corrupt ? "verify" : "pull", newest.key, message(err));
    }
    metrics.pulls.inc({ result: "new" });
    stopTimer();
    trace("agent", "pull.end", { key: config.key, via: "list" });
    return this.take(config);
  }

  private async take(config: StoredConfig): Promise<void> {
    if (this.stopped) return;
    // Newest wins, never older (invariant 1), whatever path brought the config here.
    const runningKey = this.current?.key ?? null;
    if (runningKey !== null && config.key <= runningKey) {
      trace("agent", "take.stale", { key: config.key, running: runningKey });
      return;
    }
    // Same bytes under a newer key (e.g. the unknown file on disk after a crash): nothing to apply.
    if (config.sha256 === this.current?.sha256 && !this.liveUnknown) {
      if (!this.unvalidated) return this.succeed(config, "unchanged", performance.now());
      // Live but not yet checked: recorded under this key once its check (of the same bytes) passes.
      this.current = { ...this.current, key: config.key, revision: config.revision };
      this.unvalidated = { config, t0: this.unvalidated.t0 };
      return this.validate();
    }
    await this.apply(config);
  }

  private async apply(config: StoredConfig): Promise<void> {
    const t0 = performance.now();
    await this.ensureServerStateFile(config.config);
    const running = this.current;
    const live = running && this.started && this.o.haproxy.running ? { text: running.text, known: !this.liveUnknown } : null;
    const decision = decideApply(live, config.config);
    if (decision.kind === "runtime") return this.applyThroughRuntime(decision.socket, running!, config, decision.commands, decision.slots, t0);
    if (live && decision.kind === "reload") this.o.log.info({ key: config.key, reason: decision.reason }, "config change needs a reload");
    await this.checkThenActivate(config, t0);
  }

  /** `haproxy -c` and, meanwhile, the server states the reload will carry over; then the reload. */
  private async checkThenActivate(config: StoredConfig, t0: number): Promise<void> {
    const [ok, serverState] = await Promise.all([this.check(config), this.serverStateFor(config.config)]);
    if (!ok) return;
    trace("agent", "check.done", { key: config.key });
    if (await this.supersededWhileWaiting(config.key)) return;
    await this.activate(config, t0, serverState);
  }

  /** `haproxy -c`; false (failure recorded) when HAProxy rejects the config or cannot be run. */
  private async check(config: StoredConfig): Promise<boolean> {
    const verdict = await this.verdict(config, this.abort.signal);
    if (this.stopped) return false;
    if (!verdict.ok) await this.fail(verdict.stage, config.key, verdict.message);
    return verdict.ok;
  }

  private verdict(config: StoredConfig, signal?: AbortSignal): Promise<CheckVerdict> {
    const { configPath, haproxyBin, log, check = checkConfig } = this.o;
    return configVerdict(config, { check, haproxyBin, workDir: dirname(configPath), log }, signal);
  }

  /**
   * Only server slots changed: the new config is the running one with other literal addresses,
   * each checked by diffConfigs' grammar, setServerAddr and HAProxy's runtime API. So the slots
   * change first, which is what makes an endpoint change take effect in milliseconds instead of
   * after `haproxy -c` (a quarter of a second at 1,000 Services); the check then runs in the
   * background (validate()), the file is written only once `haproxy -c` agrees, and should it
   * not, the slots are changed back to the file's config.
   */
  private async applyThroughRuntime(socket: string, running: Running, config: StoredConfig, commands: RuntimeCommand[], slots: number, t0: number): Promise<void> {
    const { log, metrics } = this.o;
    try {
      await this.applyRuntime(socket, commands);
      trace("agent", "runtime.done", { key: config.key, changes: slots });
    } catch (err) {
      log.warn({ key: config.key, err: message(err) }, "runtime API update failed; reloading instead");
      if (!(await this.undoRuntime(config.config, running.text))) this.liveUnknown = true;
      await this.checkThenActivate(config, t0);
      // Not activated (rejected, failed or superseded): put the slots back by reloading the file.
      if (this.liveUnknown) await this.reloadFromDisk();
      return;
    }
    metrics.runtimeServerChanges.inc(slots);
    this.current = { text: config.config, sha256: config.sha256, key: config.key, revision: config.revision };
    this.unvalidated = { config, t0 };
    this.validate();
  }

  /** Puts the slots of `fromText` (live) back to those of `toText`; false when that failed (the slots are then unknown). */
  private async undoRuntime(fromText: string, toText: string): Promise<boolean> {
    const back = decideApply({ text: fromText, known: true }, toText);
    if (back.kind === "identical") return true;
    if (back.kind === "reload") {
      this.o.log.error({ reason: back.reason }, "cannot undo the runtime changes: reloading the file's config");
      return false;
    }
    try {
      await this.applyRuntime(back.socket, back.commands);
      return true;
    } catch (err) {
      this.o.log.error({ err: message(err) }, "cannot undo the runtime changes: reloading the file's config");
      return false;
    }
  }

  /**
   * The live slots are not known (an undo failed): reload HAProxy onto the file, which holds the
   * last checked config, dropping every runtime change. On failure the next change reloads.
   */
  private async reloadFromDisk(): Promise<void> {
    const { haproxy, metrics, log } = this.o;
    this.liveUnknown = true;
    if (!this.started || !haproxy.running || !this.onDisk || this.stopped) return;
    this.lastReloadAt = performance.now();
    metrics.reloads.inc();
    trace("agent", "reload.start", { key: this.onDisk.key, why: "undo" });
    const result = await haproxy.reload().catch((err: unknown) => ({ ok: false, reason: message(err) }));
    trace("agent", "reload.end", { key: this.onDisk.key });
    if (!result.ok) {
      metrics.reloadFailures.inc();
      log.error({ reason: result.reason }, "reloading the file's config failed; the next change reloads");
      return;
    }
    const dropped = this.unvalidated;
    this.cancelValidation();
    this.unvalidated = null;
    this.current = this.onDisk;
    this.liveUnknown = false;
    log.warn({ key: this.onDisk.key }, "reloaded the file's config to undo runtime changes");
    // Runtime changes newer than the file were dropped with the rest: pull them again.
    if (dropped) this.pending = true;
  }

  /**
   * Starts `haproxy -c` of the newest unvalidated live config, unless a check runs already (the
   * loop checks the newest one after it: coalescing). The verdict is acted on in the apply loop
   * (finishValidation), never concurrently with a pull or an apply.
   */
  private validate(): void {
    const u = this.unvalidated;
    if (!u || this.validation || this.stopped) return;
    clearTimeout(this.checkRetry);
    this.checkRetry = undefined;
    const abort = new AbortController();
    const v: Validation = {
      config: u.config,
      t0: u.t0,
      abort,
      settled: false,
      cancelled: false,
      done: this.verdict(u.config, abort.signal).then((r) => {
        v.settled = true;
        return r;
      }),
    };
    this.validation = v;
  }

  /** Acts on a background check's verdict: write and record the config, or undo it. */
  private async finishValidation(v: Validation): Promise<void> {
    const { configPath, log } = this.o;
    const verdict = await v.done;
    if (this.validation === v) this.validation = null;
    if (v.cancelled) return this.validate();
    // The verdict is on bytes: the same config pulled again under a newer key meanwhile (see
    // take()) is recorded under that key, once, with the time it first went live.
    const u = this.unvalidated;
    const checked = u !== null && u.config.sha256 === v.config.sha256 ? u : { config: v.config, t0: v.t0 };
    if (!verdict.ok && verdict.unavailable) return this.checkUnavailable(checked, verdict.message);
    this.checkRetries = 0;
    if (checked === u) this.unvalidated = null;
    let failed: CheckVerdict = verdict;
    if (verdict.ok) {
      trace("agent", "check.done", { key: checked.config.key });
      try {
        await this.writeConfig(checked.config.config);
      } catch (err) {
        failed = { ok: false, stage: "apply", message: `cannot write ${configPath}: ${message(err)}` };
      }
    }
    if (failed.ok) {
      await this.succeed(checked.config, "runtime", checked.t0);
      return this.validate();
    }
    // Rejected: back to the file's config, whatever was applied on top of the rejected one meanwhile.
    const live = this.current;
    let undone = true;
    if (live && this.onDisk && live !== this.onDisk) undone = await this.undoRuntime(live.text, this.onDisk.text);
    const newerWasLive = this.unvalidated !== null;
    if (newerWasLive) log.warn({ key: this.unvalidated!.config.key }, "undone with the rejected config it was applied on; it is pulled again");
    this.current = this.onDisk;
    this.unvalidated = null;
    if (!undone) await this.reloadFromDisk();
    await this.fail(failed.stage, checked.config.key, failed.message);
    // A newer config was live on top of the rejected one: pull it again (it sorts after the failure).
    if (newerWasLive) this.pending = true;
  }

  /**
   * The check of live runtime changes could not run to a verdict: nothing is known against the
   * config, so they stay live (undoing them would make a hiccup of the node an outage of the
   * endpoints), unrecorded and unwritten; the failure is reported and the newest live config is
   * checked again after a backoff (or as soon as a newer one goes live).
   */
  private async checkUnavailable(checked: Unvalidated, why: string): Promise<void> {
    const { backoff, metrics, log } = this.o;
    if (!this.unvalidated && this.current?.sha256 === checked.config.sha256) this.unvalidated = checked;
    const key = (this.unvalidated ?? checked).config.key;
    this.checkRetries++;
    const retryInMs = Math.min(backoff.initialMs * 2 ** (this.checkRetries - 1), backoff.maxMs);
    metrics.checksUnavailable.inc();
    const text = `${why}; the runtime changes stay live and are checked again in ${retryInMs} ms`;
    log.error({ key, retryInMs }, text);
    await this.record({ ...this.state, lastError: { stage: "check", key, message: text, at: new Date().toISOString() } });
    if (this.stopped || !this.unvalidated) return;
    clearTimeout(this.checkRetry);
    this.checkRetry = setTimeout(() => {
      this.checkRetry = undefined;
      if (this.stopped) return;
      this.validate();
      void this.run();
    }, retryInMs);
  }

  /** Make before break: the commands are in planRuntime's order, one at a time. */
  private async applyRuntime(socket: string, commands: RuntimeCommand[]): Promise<void> {
    const runtime = this.o.runtime ?? REAL_RUNTIME;
    for (const c of commands) await runtime.run(socket, c);
  }

  /** Waits out --min-reload-interval; true when a newer config was published meanwhile (it will be pulled next). */
  private async supersededWhileWaiting(key: string): Promise<boolean> {
    const wait = this.lastReloadAt + this.o.minReloadIntervalMs - performance.now();
    if (wait <= 0) return false;
    try {
      await sleep(wait, undefined, { signal: this.abort.signal });
    } catch {
      return true; // stopped
    }
    if (!this.pending) return false;
    const [newest] = await this.o.store.history({ limit: 1 }).catch(() => []);
    return newest !== undefined && newest.key > key;
  }

  /** Write the file and make HAProxy run it: start it the first time, reload afterwards. */
  private async activate(config: StoredConfig, t0: number, serverState: string | null): Promise<void> {
    const { haproxy, metrics, log } = this.o;
    // The file is put back to this on failure: the last config that passed, not unchecked runtime changes.
    const previous = this.onDisk;
    const stateFile = serverStateFileOf(config.config);
    if (stateFile && serverState !== null) await this.writeServerState(stateFile, serverState);
    // This config replaces the live runtime changes: their check no longer matters.
    const superseded = this.unvalidated;
    this.cancelValidation();
    this.unvalidated = null;
    let how: "start" | "reload";
    try {
      await this.writeConfig(config.config);
      if (!this.started) {
        how = "start";
        await haproxy.start();
        this.started = true;
      } else {
        how = "reload";
        this.lastReloadAt = performance.now();
        metrics.reloads.inc();
        trace("agent", "reload.start", { key: config.key });
        const result = await haproxy.reload().catch((err: unknown) => ({ ok: false, reason: message(err) }));
        trace("agent", "reload.end", { key: config.key });
        if (!result.ok) {
          metrics.reloadFailures.inc();
          throw new Error(`reload failed: ${result.reason ?? "unknown reason"}`);
        }
      }
    } catch (err) {
      if (previous) await this.writeConfig(previous.text).catch((e: unknown) => log.error({ err: message(e) }, "cannot restore the previous config file"));
      // The previous worker keeps serving, with its unchecked runtime changes: check them again.
      if (superseded && this.current?.sha256 === superseded.config.sha256) {
        this.unvalidated = superseded;
        this.validate();
      }
      return this.fail("apply", config.key, message(err));
    } finally {
      if (stateFile) await this.writeServerState(stateFile, EMPTY_SERVER_STATE);
    }
    this.liveUnknown = false;
    return this.succeed(config, how, t0);
  }

  /** haproxy.cfg ← text, atomically; replaced but not synced to disk (NotDurableError) counts as written. */
  private async writeConfig(text: string): Promise<void> {
    try {
      await writeFileAtomic(this.o.configPath, text);
    } catch (err) {
      if (!(err instanceof NotDurableError)) throw err;
      this.o.log.warn({ err: err.message }, "the config file was replaced but may not survive a power loss");
    }
  }

  /** Health and maintenance states to keep across the reload, for servers that stay the same endpoint; null: none. */
  private async serverStateFor(nextConfig: string): Promise<string | null> {
    const socket = this.current && statsSocketOf(this.current.text);
    if (!socket || !this.started || !this.o.haproxy.running) return null;
    try {
      return serverStateFor(await (this.o.runtime ?? REAL_RUNTIME).serversState(socket), nextConfig);
    } catch (err) {
      this.o.log.warn({ err: message(err) }, "cannot save server states before the reload; servers restart from the config alone");
      return null;
    }
  }

  /** HAProxy (and `haproxy -c`) warn about a missing server-state file; an empty one says "no saved state". */
  private async ensureServerStateFile(config: string): Promise<void> {
    const path = serverStateFileOf(config);
    if (path && !existsSync(path)) await this.writeServerState(path, EMPTY_SERVER_STATE);
  }

  private async writeServerState(path: string, text: string): Promise<void> {
    try {
      await mkdir(dirname(path), { recursive: true });
      await writeFileAtomic(path, text);
    } catch (err) {
      this.o.log.warn({ path, err: message(err) }, "cannot write the server-state file");
    }
  }

  /** No newer config could be applied: serve the one on disk, if HAProxy is not running one yet. */
  private async ensureStarted(): Promise<void> {
    const running = this.current;
    if (this.started || !running || this.stopped) return;
    const t0 = performance.now();
    try {
      await this.ensureServerStateFile(running.text);
      await this.o.haproxy.start();
      this.started = true;
    } catch (err) {
      return this.fail("apply", running.key, `HAProxy did not start on ${this.o.configPath}: ${message(err)}`);
    }
    // Started from disk because nothing newer could be had: an error pulling it still stands.
    await this.succeed({ key: running.key, config: running.text, sha256: running.sha256, revision: running.revision }, "start", t0, this.state.lastError);
  }

  private async succeed(
    config: Omit<StoredConfig, "key" | "revision"> & { key: string | null; revision: string | null },
    how: AppliedConfig["how"],
    t0: number,
    lastError: AgentError | null = null,
  ): Promise<void> {
    const { metrics, log } = this.o;
    const running: Running = { text: config.config, sha256: config.sha256, key: config.key, revision: config.revision };
    // A runtime config became live when applied; a newer one may be live by the time its check passed.
    if (how !== "runtime") this.current = running;
    this.onDisk = how === "runtime" && this.current?.sha256 === running.sha256 && this.current.key === running.key ? this.current : running;
    this.failure = null;
    const applied: AppliedConfig = { key: config.key, sha256: config.sha256, revision: config.revision, appliedAt: new Date().toISOString(), how };
    const ms = performance.now() - t0;
    metrics.appliedRevision.set(config.revision === null ? 0 : Number(config.revision));
    metrics.appliedTimestamp.set(Date.now() / 1000);
    metrics.applySeconds.observe({ how }, ms / 1000);
    if (how === "runtime") metrics.runtimeUpdates.inc();
    log.info({ key: config.key, revision: config.revision, how, ms: Math.round(ms) }, "config applied");
    trace("agent", "applied", { key: config.key, how });
    await this.record({ applied, lastError });
  }

  private async fail(stage: AgentError["stage"], key: string | null, text: string): Promise<void> {
    const { backoff, metrics, log } = this.o;
    metrics.applyFailures.inc({ stage });
    let retryInMs: number | undefined;
    if (stage !== "pull" && key !== null) {
      const attempts = this.failure?.key === key ? this.failure.attempts + 1 : 1;
      retryInMs = Math.min(backoff.initialMs * 2 ** (attempts - 1), backoff.maxMs);
      this.failure = { key, attempts, retryAt: Date.now() + retryInMs };
    }
    log.error({ stage, key, retryInMs }, `config not applied (${stage}): ${text}; the previous config keeps serving`);
    await this.record({ ...this.state, lastError: { stage, key, message: text, at: new Date().toISOString() } });
  }

  private async record(state: AgentState): Promise<void> {
    this.state = state;
    try {
      await saveState(this.o.stateFile, state);
    } catch (err) {
      this.o.log.error({ err: message(err), file: this.o.stateFile }, "cannot save the agent state");
    }
    this.o.onChange?.();
  }
}
