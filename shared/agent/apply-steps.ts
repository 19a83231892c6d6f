/*
 * Takes one config onto the node (decide.ts says how): through the runtime API when only server
 * slots and the lines of pattern files changed — slots make before break, each file swapped
 * atomically, then written, no `haproxy -c` (see applyThroughRuntime for why none is needed) —
 * else `haproxy -c`, atomic write, reload (or the first start). The pull
 * loop (pull-loop.ts) calls it one step at a time; nothing here runs concurrently.
 *
 * Never lose the last good config (docs/design.md#invariant-3-never-lose-the-last-good-config):
 * haproxy.cfg only ever holds a config that passed `haproxy -c`, or one that differs from such a
 * config only in server addresses and server lines HAProxy's runtime API accepted; when a reload
 * or start fails the previous file is put back, so a later reload or
 * restart cannot pick up a failure.
 */

import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ReloadResult } from "../adapters/haproxy/master.js";
import { RuntimeCommandsError } from "../adapters/haproxy/runtime.js";
import type { Logger } from "../adapters/log.js";
import type { ObjectStore, StoredConfig } from "../adapters/store.js";
import type { Backoff } from "../core/backoff.js";
import { compareConfigKeys } from "../core/publish/config-key.js";
import type { NodeFiles } from "../core/model/descriptors.js";
import { type ConfigParser, configParser } from "../core/haproxy-config/parse.js";
import type { HaproxyEnv } from "../core/haproxy-config/environment.js";
import type { PatternFile } from "../core/haproxy-config/pattern-files.js";
import { EMPTY_SERVER_STATE, serverStateFor } from "../core/haproxy-config/server-state.js";
import type { RuntimeCommand } from "../core/haproxy-config/runtime-plan.js";
import { ConfigFiles } from "./config-files.js";
import { type ApplyDecision, decideApply } from "./decide.js";
import type { AgentMetrics } from "./metrics.js";
import type { KnownConfig, NodeState } from "./node-state.js";
import { admitConfig, type Admission, type ConfigChecker } from "./admission.js";
import type { ApplyStages, StageDecorators, StepOutcome } from "./pull-stages.js";
import { errorMessage } from "../core/error-message.js";

/** What the apply steps need of HAProxy's process; HaproxyProcess provides it. */
export interface HaproxyControl {
  readonly running: boolean;
  /** Starts HAProxy on the config file; resolves once it serves. */
  start(): Promise<void>;
  /** Reloads onto the config file; `ok: false` means the previous worker kept serving. */
  reload(): Promise<Pick<ReloadResult, "ok" | "reason">>;
}

/** What the apply steps do on HAProxy's runtime API socket. */
export interface RuntimePort {
  /** The commands in order; a failure is a RuntimeCommandsError that says how many took effect. */
  runAll(socket: string, commands: readonly RuntimeCommand[]): Promise<void>;
  /** Replaces a loaded pattern file's lines at once (prepare, add, commit); on failure the live list is unchanged. */
  swapPatterns(socket: string, file: PatternFile): Promise<void>;
  /** `show servers state`, as the server-state file takes it. */
  serversState(socket: string): Promise<string>;
}

export interface ApplyStepsOptions {
  store: Pick<ObjectStore, "history">;
  haproxy: HaproxyControl;
  configPath: string;
  haproxyBin: string;
  /**
   * The environment HAProxy runs with, its `haproxy -c` too: the paths and addresses a config takes
   * from it are read with it (core/haproxy-config/environment.ts). Default: the agent's own.
   */
  haproxyEnv?: HaproxyEnv;
  /** Longest `haproxy -c` (--check-timeout). */
  checkTimeoutMs: number;
  minReloadIntervalMs: number;
  /** Wait before checking again live changes whose check could not run: initialMs, doubling up to maxMs. */
  backoff: Backoff;
  metrics: AgentMetrics;
  log: Logger;
  /** The descriptors HAProxy may open on this node (admission.ts); unknown, configs are not counted. */
  openFiles?: () => NodeFiles | null;
  /** HAProxy's ports: the real ones are wired in agent.ts; a test injects fakes to force an interleaving. */
  check: ConfigChecker;
  runtime: RuntimePort;
  /** Wraps the stages of each apply and pull (pull-stages.ts): the composition root may; the benches' stage trace does. */
  decorate?: StageDecorators;
}

/** What the apply steps ask of the pull loop's state: they read it, and never act on the loop. */
export interface LoopView {
  stopped(): boolean;
  /** A pull was asked for since the loop's last look. */
  pullRequested(): boolean;
  /** A pin is set (see pull-target.ts): the pinned config is never superseded by a newer one. */
  pinned(): boolean;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
}

/** A runtime step (the slot commands, or a pattern file swap) failed. */
class RuntimeStepError extends Error {
  constructor(
    /** Whether HAProxy's slots or lists may have changed before the step failed. */
    readonly changedAnything: boolean,
    cause: unknown,
  ) {
    super(errorMessage(cause), { cause });
  }
}

export class ApplySteps {
  private lastReloadAt = -Infinity;
  private readonly files: ConfigFiles;
  /** The stages of an apply, as the composition root may have wrapped them. */
  private readonly stages: ApplyStages;
  /** Each config parsed once: the running one and the new one (core/haproxy-config/parse.ts). */
  private readonly parse: ConfigParser;

  constructor(
    private readonly options: ApplyStepsOptions,
    private readonly node: NodeState,
    private readonly loop: LoopView,
  ) {
    this.parse = configParser(options.haproxyEnv ?? process.env);
    this.files = new ConfigFiles(options.configPath, options.log, this.parse);
    const stages: ApplyStages = {
      check: async (config) => {
        const [ok, serverState] = await Promise.all([this.check(config), this.serverStateFor(config.config)]);
        return { ok, serverState };
      },
      runtime: (_config, decision) => this.applyRuntime(decision),
      start: async () => {
        await this.options.haproxy.start();
        this.node.haproxyServes();
      },
      reload: () => this.options.haproxy.reload().catch((err: unknown) => ({ ok: false, reason: errorMessage(err) })),
      applied: (config, how, t0, lastError) => this.node.succeed(config, how, t0, lastError ?? null),
    };
    this.stages = options.decorate?.apply?.(stages) ?? stages;
  }

  /** Records a config as applied, through the stages (the pull loop's config that runs already). */
  applied(...args: Parameters<ApplyStages["applied"]>): Promise<void> {
    return this.stages.applied(...args);
  }

  async apply(config: StoredConfig): Promise<StepOutcome> {
    const t0 = performance.now();
    await this.files.ensureServerStateFile(config.config);
    const running = this.node.current;
    const live =
      running && this.node.started && this.options.haproxy.running
        ? { config: this.parse(running.text), known: !this.node.liveUnknown }
        : null;
    const decision = decideApply(live, this.parse(config.config));
    if (decision.kind === "runtime") return this.applyThroughRuntime(decision, running!, config, t0);
    if (live && decision.kind === "reload")
      this.options.log.info({ key: config.key, reason: decision.reason }, "config change needs a reload");
    await this.checkThenActivate(config, t0);
    return "done";
  }

  /** `haproxy -c` and, meanwhile, the server states the reload will carry over; then the reload. */
  private async checkThenActivate(config: StoredConfig, t0: number): Promise<void> {
    const { ok, serverState } = await this.stages.check(config);
    if (!ok) return;
    if (await this.supersededWhileWaiting(config.key)) return;
    await this.activate(config, t0, serverState);
  }

  /** `haproxy -c`; false (failure recorded) when HAProxy rejects the config or cannot be run. */
  private async check(config: StoredConfig): Promise<boolean> {
    const verdict = await this.admit(config, this.loop.signal);
    if (this.loop.stopped()) return false;
    if (!verdict.ok) await this.node.fail(verdict.stage, config.key, verdict.message);
    return verdict.ok;
  }

  private admit(config: StoredConfig, signal?: AbortSignal): Promise<Admission> {
    const { configPath, haproxyBin, haproxyEnv, checkTimeoutMs, log, openFiles, check } = this.options;
    return admitConfig(
      config,
      { check, haproxyBin, env: haproxyEnv, timeoutMs: checkTimeoutMs, workDir: dirname(configPath), log, openFiles },
      signal,
    );
  }

  /**
   * Only server slots and pattern files' lines changed: live at once through the runtime API
   * (slots make before break, each file swapped atomically), then written. No `haproxy -c`: the
   * new config is a config that passed it (or that HAProxy runs) with other server addresses and
   * `disabled` flags in existing slots, and other lines in pattern files it already loads, and
   * server lines appended to a backend's servers, and nothing else — every other line is
   * byte-identical (diffConfigs, diffPatternFiles), each changed or added server line matches the
   * server grammar (an IP literal and a port, the same parameters; an added one none but
   * `disabled`), each pattern line is an address or CIDR (splitConfig), and HAProxy's runtime API
   * accepted each address, state, pattern and new server (`add server`, given the backend's
   * `default-server` parameters, which are the config parser's defaults for the line). A config HAProxy parsed with these differs
   * from one it accepted only in values its own runtime API just validated, so the check could
   * not say no; it would cost a full parse of the config (a quarter of a second of CPU at 1,000
   * Services) per change. Should the files not be written, the slots and lists go back, so
   * HAProxy and the files never disagree.
   */
  private async applyThroughRuntime(
    decision: Extract<ApplyDecision, { kind: "runtime" }>,
    running: KnownConfig,
    config: StoredConfig,
    t0: number,
  ): Promise<StepOutcome> {
    const { configPath, log, metrics } = this.options;
    const { slots } = decision;
    try {
      await this.stages.runtime(config, decision);
    } catch (err) {
      // Some commands ran, some did not: the slots are neither config's. A reload sets every slot
      // from a file, with no drop: the new config's once it passes haproxy -c, else the old one's.
      log.warn({ key: config.key, err: errorMessage(err) }, "runtime API update failed; reloading instead");
      if (!(err instanceof RuntimeStepError) || err.changedAnything) this.node.lostTrackOfSlots();
      await this.checkThenActivate(config, t0);
      // Not activated (rejected, failed or superseded): put the slots back by reloading the file.
      return this.node.liveUnknown ? this.reloadFromDisk() : "done";
    }
    metrics.runtimeServerChanges.inc(slots);
    metrics.runtimePatternSwaps.inc(decision.files.length);
    this.node.ranThroughRuntime({
      text: config.config,
      sha256: config.sha256,
      key: config.key,
      revision: config.revision,
    });
    try {
      await this.files.writeConfig(config.config);
    } catch (err) {
      let outcome: StepOutcome = "done";
      if (await this.undoRuntime(config.config, running.text)) this.node.undidRuntime(running);
      else outcome = await this.reloadFromDisk();
      await this.node.fail("apply", config.key, `cannot write ${configPath}: ${errorMessage(err)}`);
      return outcome;
    }
    await this.stages.applied(config, "runtime", t0);
    return "done";
  }

  /** Puts the slots of `fromText` (live) back to those of `toText`; false when that failed (the slots are then unknown). */
  private async undoRuntime(fromText: string, toText: string): Promise<boolean> {
    const back = decideApply({ config: this.parse(fromText), known: true }, this.parse(toText));
    if (back.kind === "identical") return true;
    if (back.kind === "reload") {
      this.options.log.error({ reason: back.reason }, "cannot undo the runtime changes: reloading the file's config");
      return false;
    }
    try {
      await this.applyRuntime(back);
      return true;
    } catch (err) {
      this.options.log.error(
        { err: errorMessage(err) },
        "cannot undo the runtime changes: reloading the file's config",
      );
      return false;
    }
  }

  /**
   * The live slots are not known (a runtime change or its undo failed half-way): reload HAProxy
   * onto the file, which holds the last applied config. On failure the next change reloads.
   */
  async reloadFromDisk(): Promise<StepOutcome> {
    const { haproxy, metrics, log } = this.options;
    this.node.lostTrackOfSlots();
    const file = this.node.onDisk;
    if (!this.node.started || !haproxy.running || !file || this.loop.stopped()) return "done";
    this.lastReloadAt = performance.now();
    metrics.reloads.inc();
    const result = await this.stages.reload(file.key, "undo");
    if (!result.ok) {
      metrics.reloadFailures.inc();
      log.error({ reason: result.reason }, "reloading the file's config failed; the next change reloads");
      return "done";
    }
    const dropped = this.node.reloadedFromDisk();
    log.warn({ key: file.key }, "reloaded the file's config to undo runtime changes");
    // Runtime changes newer than the file were dropped with the rest: they are to be pulled again.
    return dropped ? "dropped" : "done";
  }

  /**
   * Make before break: the slot commands in planRuntime's order, on one line; then each pattern
   * file; then the slots of the backends left with none ready.
   */
  private async applyRuntime({
    socket,
    commands,
    files,
    emptying,
  }: Extract<ApplyDecision, { kind: "runtime" }>): Promise<void> {
    const { runtime } = this.options;
    const run = async (list: readonly RuntimeCommand[], before: number) => {
      try {
        await runtime.runAll(socket, list);
      } catch (err) {
        // Anything else was thrown before a command was sent.
        const changed = err instanceof RuntimeCommandsError && (err.unknown || err.tookEffect > 0);
        throw new RuntimeStepError(before > 0 || changed, err);
      }
    };
    await run(commands, 0);
    for (const [i, f] of files.entries()) {
      try {
        await runtime.swapPatterns(socket, f);
      } catch (err) {
        // A failed swap leaves its own file's lines as they were.
        throw new RuntimeStepError(commands.length + i > 0, err);
      }
    }
    if (emptying.length > 0) await run(emptying, commands.length + files.length);
  }

  /** Waits out --min-reload-interval; true when a newer config was published meanwhile (it will be pulled next). */
  private async supersededWhileWaiting(key: string): Promise<boolean> {
    const wait = this.lastReloadAt + this.options.minReloadIntervalMs - performance.now();
    if (wait <= 0) return false;
    try {
      await sleep(wait, undefined, { signal: this.loop.signal });
    } catch {
      return true; // stopped
    }
    // An unpin is seen by the next pull.
    if (!this.loop.pullRequested() || this.loop.pinned()) return false;
    const entries = await this.options.store.history().catch(() => []);
    const newest = entries.find((e) => e.untrusted === undefined);
    return newest !== undefined && compareConfigKeys(newest.key, key) > 0;
  }

  /** Write the file and make HAProxy run it: start it the first time, reload afterwards. */
  private async activate(config: StoredConfig, t0: number, serverState: string | null): Promise<void> {
    const { metrics, log } = this.options;
    // The file is put back to this on failure: what the previous worker, which keeps serving, runs.
    const previous = this.node.onDisk;
    const parsed = this.parse(config.config);
    const stateFile = "error" in parsed ? undefined : parsed.serverStateFile;
    if (stateFile && serverState !== null) await this.files.writeServerState(stateFile, serverState);
    let how: "start" | "reload";
    try {
      await this.files.writeConfig(config.config);
      if (!this.node.started) {
        how = "start";
        await this.stages.start(config.key);
      } else {
        how = "reload";
        this.lastReloadAt = performance.now();
        metrics.reloads.inc();
        const result = await this.stages.reload(config.key);
        if (!result.ok) {
          metrics.reloadFailures.inc();
          throw new Error(`reload failed: ${result.reason ?? "unknown reason"}`);
        }
      }
    } catch (err) {
      if (previous)
        await this.files
          .writeConfig(previous.text)
          .catch((e: unknown) => log.error({ err: errorMessage(e) }, "cannot restore the previous config file"));
      return this.node.fail("apply", config.key, errorMessage(err));
    } finally {
      if (stateFile) await this.files.writeServerState(stateFile, EMPTY_SERVER_STATE);
    }
    return this.stages.applied(config, how, t0);
  }

  /** Health and maintenance states to keep across the reload, for servers that stay the same endpoint; null: none. */
  private async serverStateFor(nextText: string): Promise<string | null> {
    const running = this.node.current && this.parse(this.node.current.text);
    const socket = running && !("error" in running) ? running.statsSocket : undefined;
    const next = this.parse(nextText);
    if (!socket || "error" in next || !this.node.started || !this.options.haproxy.running) return null;
    try {
      return serverStateFor(await this.options.runtime.serversState(socket), next);
    } catch (err) {
      this.options.log.warn(
        { err: errorMessage(err) },
        "cannot save server states before the reload; servers restart from the config alone",
      );
      return null;
    }
  }

  /** No newer config could be applied: serve the one on disk, if HAProxy is not running one yet. */
  async ensureStarted(): Promise<void> {
    const running = this.node.current;
    if (this.node.started || !running || this.loop.stopped()) return;
    const t0 = performance.now();
    try {
      await this.files.ensureServerStateFile(running.text);
      await this.files.ensurePatternFiles(running.text);
      await this.options.haproxy.start();
      this.node.haproxyServes();
    } catch (err) {
      return this.node.fail(
        "apply",
        running.key,
        `HAProxy did not start on ${this.options.configPath}: ${errorMessage(err)}`,
      );
    }
    // Started from disk because nothing newer could be had: an error pulling it still stands.
    await this.stages.applied(
      { key: running.key, config: running.text, sha256: running.sha256, revision: running.revision },
      "start",
      t0,
      this.node.lastError,
    );
  }
}
