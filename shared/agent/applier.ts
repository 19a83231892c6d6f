import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { diffConfigs, type ServerChange } from "../core/config-diff.js";
import { checkConfig } from "../adapters/haproxy/check.js";
import { sha256 } from "../core/sha256.js";
import type { ReloadResult } from "../adapters/haproxy/master.js";
import { setServerAddr, setServerState, showServersState } from "../adapters/haproxy/runtime.js";
import type { Logger } from "../adapters/log.js";
import { StoreError, type ObjectStore, type StoredConfig } from "../adapters/object-store.js";
import { serverStateFileOf, statsSocketOf } from "./config-facts.js";
import { writeFileAtomic } from "./files.js";
import type { AgentMetrics } from "./metrics.js";
import { trace } from "../adapters/trace.js";
import { EMPTY_SERVER_STATE, serverStateFor } from "./server-state.js";
import { saveState, type AgentError, type AgentState, type AppliedConfig } from "./state.js";

/**
 * Brings HAProxy to the newest published config, one step at a time:
 * list → fetch (sha256 verified by the store) → runtime API when only server slots changed,
 * else `haproxy -c` → atomic write → reload through the master socket, confirmed by `show proc`.
 *
 * - Newest wins, never older: a config is taken only if its key sorts after the running one's.
 * - Never lose the last good config (invariant 3): nothing reaches haproxy.cfg before it passed
 *   `haproxy -c`, and when a reload or start fails the previous file is put back, so that the
 *   file always describes what runs and a later reload or restart cannot pick up a failure.
 *   (Endpoint-only changes go live before the check: see applyThroughRuntime.)
 * - A failed config is retried only when a newer one appears or its backoff expires.
 * - At most one pull in flight; requests during it fold into one more pull after it.
 * - Reloads are at least minReloadIntervalMs apart; a config waiting for its slot gives way to
 *   a newer one published meanwhile.
 */

/** What the applier needs of HAProxy; HaproxyProcess provides it. */
export interface HaproxyControl {
  readonly running: boolean;
  /** Starts HAProxy on the config file; resolves once it serves. */
  start(): Promise<void>;
  /** Reloads onto the config file; `ok: false` means the previous worker kept serving. */
  reload(): Promise<ReloadResult>;
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
}

interface Running {
  text: string;
  sha256: string;
  /** null: a config on disk the agent cannot name (see state.ts). */
  key: string | null;
  revision: string | null;
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
  private current: Running | null = null;
  private started = false;
  private state: AgentState;
  private failure: Failure | null = null;
  private lastReloadAt = -Infinity;
  private inFlight: Promise<void> | undefined;
  private pending = false;
  private stopped = false;
  private readonly abort = new AbortController();

  constructor(private readonly o: ApplierOptions) {
    let applied: AppliedConfig | null = null;
    if (o.disk !== null) {
      const sha = sha256(o.disk);
      const known = o.saved.applied?.sha256 === sha ? o.saved.applied : null;
      this.current = { text: o.disk, sha256: sha, key: known?.key ?? null, revision: known?.revision ?? null };
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
    if (this.inFlight) {
      this.pending = true;
      return this.inFlight;
    }
    this.inFlight = this.drain().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /** A ping named `key`: pull unless that config (or a newer one) already runs. Returns at once. */
  notify(key: string): "pulling" | "current" {
    trace("agent", "notify", { key, busy: this.inFlight !== undefined });
    if (this.current?.key && key <= this.current.key) return "current";
    void this.sync();
    return "pulling";
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    while (this.inFlight) await this.inFlight;
  }

  private async drain(): Promise<void> {
    do {
      this.pending = false;
      try {
        await this.cycle();
        await this.ensureStarted();
      } catch (err) {
        // Every expected failure is recorded where it happens; this is a bug, but the loop must go on.
        this.o.log.error({ err }, "unexpected error while applying a config");
      }
    } while (this.pending && !this.stopped);
  }

  private backingOff(): boolean {
    return this.failure !== null && Date.now() < this.failure.retryAt;
  }

  private async cycle(): Promise<void> {
    const { store, metrics } = this.o;
    const afterKey = this.backingOff() ? this.failure!.key : (this.current?.key ?? null);
    const stopTimer = metrics.pullSeconds.startTimer();
    trace("agent", "pull.start");
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
      if (!this.failure && this.state.lastError) await this.record({ ...this.state, lastError: null });
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
    trace("agent", "pull.end", { key: config.key });
    if (this.stopped) return;
    // Same bytes under a newer key (e.g. the unknown file on disk after a crash): nothing to apply.
    if (config.sha256 === this.current?.sha256) return this.succeed(config, "unchanged", performance.now());
    await this.apply(config);
  }

  private async apply(config: StoredConfig): Promise<void> {
    const t0 = performance.now();
    await this.ensureServerStateFile(config.config);
    const running = this.current;
    if (running && this.started && this.o.haproxy.running) {
      const diff = diffConfigs(running.text, config.config);
      const socket = statsSocketOf(running.text);
      if (diff.kind === "runtime" && socket) return this.applyThroughRuntime(socket, running, config, diff.changes, t0);
      if (diff.kind === "reload") this.o.log.info({ key: config.key, reason: diff.reason }, "config change needs a reload");
    }
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
    const { configPath, haproxyBin, log } = this.o;
    // HAProxy expands an unset variable to "": the stats page would take an empty password.
    if (config.config.includes("${SERVICELB_STATS_PASSWORD}") && !process.env.SERVICELB_STATS_PASSWORD) {
      await this.fail("check", config.key, "the config protects the stats page (--stats-user) but SERVICELB_STATS_PASSWORD is not set for HAProxy on this node");
      return false;
    }
    let check;
    try {
      check = await checkConfig(config.config, { haproxyBin, workDir: dirname(configPath) });
    } catch (err) {
      await this.fail("check", config.key, message(err));
      return false;
    }
    if (!check.ok) {
      await this.fail("check", config.key, `haproxy -c rejected the config: ${check.errors.join("; ")}`);
      return false;
    }
    if (check.warnings.length > 0) log.warn({ key: config.key, warnings: check.warnings }, "haproxy -c accepted the config with warnings");
    return true;
  }

  /**
   * Only server slots changed: the new config is the running (validated) one with other literal
   * addresses, each checked by diffConfigs' grammar, setServerAddr and HAProxy's runtime API. So
   * the slots change first, which is what makes an endpoint change take effect in milliseconds
   * instead of after `haproxy -c` (a quarter of a second at 1,000 Services); the file is written
   * only once `haproxy -c` agrees, and should it not, the slots are changed back.
   */
  private async applyThroughRuntime(socket: string, running: Running, config: StoredConfig, changes: ServerChange[], t0: number): Promise<void> {
    const { configPath, log, metrics } = this.o;
    const undo = async () => {
      const back = diffConfigs(config.config, running.text);
      if (back.kind === "runtime") await this.applyRuntime(socket, back.changes).catch((e: unknown) => log.error({ err: message(e) }, "cannot undo the runtime changes; the next reload restores the file's config"));
    };
    try {
      await this.applyRuntime(socket, changes);
      trace("agent", "runtime.done", { key: config.key, changes: changes.length });
    } catch (err) {
      log.warn({ key: config.key, err: message(err) }, "runtime API update failed; reloading instead");
      await undo();
      return this.checkThenActivate(config, t0);
    }
    if (!(await this.check(config))) return undo();
    trace("agent", "check.done", { key: config.key });
    try {
      await writeFileAtomic(configPath, config.config);
    } catch (err) {
      await undo();
      return this.fail("apply", config.key, `cannot write ${configPath}: ${message(err)}`);
    }
    metrics.runtimeServerChanges.inc(changes.length);
    await this.succeed(config, "runtime", t0);
  }

  /**
   * A slot going live is put in maintenance, re-addressed, then made ready: a server leaving
   * maintenance starts UP at once (measured on 2.6), whereas a bare address change would keep
   * the old endpoint's health, e.g. DOWN until `rise` checks pass on the new one.
   */
  private async applyRuntime(socket: string, changes: ServerChange[]): Promise<void> {
    for (const c of changes) {
      await setServerState(socket, c.backend, c.server, "maint");
      await setServerAddr(socket, c.backend, c.server, c.address, c.port);
      if (c.enabled) await setServerState(socket, c.backend, c.server, "ready");
    }
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
    const { configPath, haproxy, metrics, log } = this.o;
    const previous = this.current;
    const stateFile = serverStateFileOf(config.config);
    if (stateFile && serverState !== null) await this.writeServerState(stateFile, serverState);
    let how: "start" | "reload";
    try {
      await writeFileAtomic(configPath, config.config);
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
      if (previous) await writeFileAtomic(configPath, previous.text).catch((e: unknown) => log.error({ err: message(e) }, "cannot restore the previous config file"));
      return this.fail("apply", config.key, message(err));
    } finally {
      if (stateFile) await this.writeServerState(stateFile, EMPTY_SERVER_STATE);
    }
    return this.succeed(config, how, t0);
  }

  /** Health and maintenance states to keep across the reload, for servers that stay the same endpoint; null: none. */
  private async serverStateFor(nextConfig: string): Promise<string | null> {
    const socket = this.current && statsSocketOf(this.current.text);
    if (!socket || !this.started || !this.o.haproxy.running) return null;
    try {
      return serverStateFor(await showServersState(socket), nextConfig);
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
    this.current = { text: config.config, sha256: config.sha256, key: config.key, revision: config.revision };
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
