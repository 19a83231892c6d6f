import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { parseTimeoutMs } from "../../core/render/parse-time.js";
import { HAPROXY_INSTALL_HINT } from "./check.js";
import { reload, showProc, type ReloadResult } from "./master.js";
import { isHaproxy, processAlive } from "./proc-info.js";
import {
  decideRestart,
  DEFAULT_RESTART_POLICY,
  type Recovery,
  type RestartHistory,
  type RestartInfo,
  type SupervisionStatus,
} from "./restart-policy.js";
import { settlesWithin } from "../../core/deadline.js";
import type { HaproxyEnv } from "../../core/haproxy-config/environment.js";

export interface HaproxyProcessOptions {
  /** The master re-reads this same path on every reload: write the new config here first. */
  configPath: string;
  masterSocket: string;
  haproxyBin?: string;
  /** The master's environment, kept across reloads (it re-executes itself); default: this process's. */
  env?: HaproxyEnv;
  /** Every line HAProxy (master and workers) writes, for the caller's log. */
  onOutput?: (line: string, stream: "stdout" | "stderr") => void;
  /** Called when the master died on its own (before the restart that follows after info.delayMs), or its worker did. */
  onRestart?: (info: RestartInfo) => void;
  /**
   * Called once HAProxy serves again after onRestart, with the config file's text as it was when
   * the new master (or worker) was started (null: unreadable). It runs that file's config:
   * runtime API changes made to the dead one are gone.
   */
  onRestarted?: (configText: string | null, recovery: Recovery) => void;
  /** See restart-policy.ts. */
  restartDelayMs?: number;
  restartStableMs?: number;
  restartInitialDelayMs?: number;
  restartMaxDelayMs?: number;
  /** Soft stop (SIGUSR1) lets connections finish for this long before SIGTERM. */
  stopGraceMs?: number;
  /** After SIGTERM, this long before SIGKILL of the master and its workers. */
  killGraceMs?: number;
  startTimeoutMs?: number;
  reloadTimeoutMs?: number;
}

/** One started HAProxy master, from its spawn to its exit. */
interface MasterRun {
  child: ChildProcess;
  startedAt: number;
  /** When it was first seen serving (a worker answering in `show proc`). */
  servingSince?: number;
  /** Since when it serves the config it runs: when it began serving, or was last reloaded onto another. */
  configSince?: number;
  /** The master announced it kills everything and exits (2.6's exit-on-failure): no reload can save it. */
  exitingOnFailure?: boolean;
  exited: Promise<void>;
  /** Exit plus end of its output pipes, which workers may hold open after the master is gone. */
  closed: Promise<void>;
}

const RECENT_LINES = 20;
/** The master's line when its current worker dies; its next lines say whether it exits too. */
const CURRENT_WORKER_EXITED = /: Current worker .*exited with code/;
const EXIT_ON_FAILURE = /exit-on-failure: killing every process/;
/** Time for the master's lines after a worker's death to arrive, and for its own exit when it gives up. */
const WORKER_LOST_GRACE_MS = 150;

/** "12.3 s" */
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * HAProxy in master-worker mode as a supervised foreground child: `haproxy -W -S <sock> -f <cfg>`.
 * Foreground (no -D) so that its death is an exit event here, not a stale pid file.
 *
 * Supervision, as measured on 2.6.12: a master whose current worker dies exits as well when no
 * other worker is left, or when the worker died of anything but SIGTERM/SIGINT/exit 0 (its
 * "exit-on-failure", which `master-worker no-exit-on-failure` does not turn off in 2.6; it sends
 * every process SIGTERM first, old workers still draining included): the restart below covers
 * those. But a worker that exits cleanly while an old worker still drains
 * connections leaves the master up with no current worker and nothing listening, and the master
 * does not fork a new one by itself: a reload does, so the supervisor reloads then.
 */
export class HaproxyProcess {
  private readonly options: Required<Omit<HaproxyProcessOptions, "onOutput" | "onRestart" | "onRestarted" | "env">> &
    Pick<HaproxyProcessOptions, "onOutput" | "onRestart" | "onRestarted" | "env">;
  private current: MasterRun | undefined;
  private supervised = false;
  private stopping = false;
  private history: RestartHistory = { quickCrashes: 0, configKnownGood: false };
  private restartTimer: NodeJS.Timeout | undefined;
  private reloadQueue: Promise<unknown> = Promise.resolve();
  private readonly recent: string[] = [];
  private restarts = 0;
  private lastRestart: SupervisionStatus["lastRestart"] = null;
  private pendingRestart: SupervisionStatus["pendingRestart"] = null;

  constructor(options: HaproxyProcessOptions) {
    this.options = {
      haproxyBin: "haproxy",
      restartDelayMs: DEFAULT_RESTART_POLICY.delayMs,
      restartStableMs: DEFAULT_RESTART_POLICY.stableMs,
      restartInitialDelayMs: DEFAULT_RESTART_POLICY.backoffInitialMs,
      restartMaxDelayMs: DEFAULT_RESTART_POLICY.backoffMaxMs,
      stopGraceMs: 10_000,
      killGraceMs: 5_000,
      startTimeoutMs: 15_000,
      reloadTimeoutMs: 15_000,
      ...options,
    };
  }

  get running(): boolean {
    const c = this.current?.child;
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  /** The master's pid; it stays the same across reloads (the master re-executes itself in place). */
  get pid(): number | undefined {
    return this.running ? this.current!.child.pid : undefined;
  }

  supervision(): SupervisionStatus {
    return { restarts: this.restarts, lastRestart: this.lastRestart, pendingRestart: this.pendingRestart };
  }

  /** A wait for HAProxy to parse the config file: the setting, or longer for a large file (core/render/parse-time.ts). */
  private parseWait(settingMs: number): number {
    try {
      return parseTimeoutMs(statSync(this.options.configPath).size, settingMs);
    } catch {
      return settingMs;
    }
  }

  /** Starts HAProxy and resolves once its master answers with a worker; rejects (no restart) if it exits first. */
  async start(): Promise<void> {
    if (this.current || this.restartTimer) throw new Error("HAProxy is already started");
    this.stopping = false;
    this.supervised = false;
    this.history = { quickCrashes: 0, configKnownGood: false };
    this.recent.length = 0;
    const run = this.spawnMaster();
    const waitMs = this.parseWait(this.options.startTimeoutMs);
    const deadline = Date.now() + waitMs;
    for (;;) {
      if (!run.child.pid || run.child.exitCode !== null || run.child.signalCode !== null) {
        await settlesWithin(run.closed, 1000); // its last words are the error message
        throw new Error(`HAProxy exited during start-up:\n${this.recent.join("\n")}`);
      }
      const status = await showProc(this.options.masterSocket, { timeoutMs: 1000 }).catch(() => undefined);
      // A stale socket of an earlier master must not pass for this one.
      if (status && status.master.pid === run.child.pid && status.workers.length > 0) break;
      if (Date.now() > deadline) {
        run.child.kill("SIGKILL");
        await run.exited;
        throw new Error(
          `HAProxy did not become ready (a worker serving the config) within ${waitMs} ms:\n${this.recent.join("\n")}`,
        );
      }
      await sleep(50);
    }
    run.servingSince = run.configSince = Date.now();
    this.supervised = true;
  }

  /**
   * Reloads via the master socket, one at a time; `ok: false` means the old worker kept serving.
   * The config reloaded onto has to prove itself anew (restart-policy.ts).
   */
  reload(): Promise<ReloadResult> {
    return this.queued(async () => {
      const run = this.current;
      if (!run || !this.running) throw new Error("HAProxy is not running");
      const result = await reload(this.options.masterSocket, {
        timeoutMs: this.parseWait(this.options.reloadTimeoutMs),
      });
      if (result.ok && this.current === run) {
        run.configSince = Date.now();
        this.history = { ...this.history, configKnownGood: false };
      }
      return result;
    });
  }

  /** Runs `task` after every reload queued before it: reloads never overlap. */
  private queued<T>(task: () => Promise<T>): Promise<T> {
    const result = this.reloadQueue.then(task, task);
    this.reloadQueue = result.catch(() => undefined);
    return result;
  }

  /**
   * Soft stop (SIGUSR1: stop listening, let connections finish), then SIGTERM, then SIGKILL.
   * The master waits for its workers before it exits, except on SIGKILL: then the workers it
   * had are killed here too, so none outlives the stop.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    this.pendingRestart = null;
    await this.reloadQueue;
    const run = this.current;
    if (!run) return;
    const workers = await showProc(this.options.masterSocket, { timeoutMs: 1000 }).then(
      (s) => [...s.workers, ...s.oldWorkers].map((w) => w.pid),
      () => [] as number[],
    );
    run.child.kill("SIGUSR1");
    if (await settlesWithin(run.exited, this.options.stopGraceMs)) return;
    run.child.kill("SIGTERM");
    if (await settlesWithin(run.exited, this.options.killGraceMs)) return;
    run.child.kill("SIGKILL");
    for (const pid of workers) if (processAlive(pid) && isHaproxy(pid)) process.kill(pid, "SIGKILL");
    await run.exited;
  }

  private spawnMaster(): MasterRun {
    const { haproxyBin, masterSocket, configPath, env } = this.options;
    const child = spawn(haproxyBin, ["-W", "-S", masterSocket, "-f", configPath], {
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    let markExited!: () => void;
    const run: MasterRun = {
      child,
      startedAt: Date.now(),
      exited: new Promise((r) => (markExited = r)),
      closed: new Promise((r) => child.once("close", () => r())),
    };
    this.current = run;
    for (const stream of ["stdout", "stderr"] as const) {
      createInterface({ input: child[stream]! }).on("line", (line) => {
        this.recent.push(line);
        if (this.recent.length > RECENT_LINES) this.recent.shift();
        if (EXIT_ON_FAILURE.test(line)) run.exitingOnFailure = true;
        else if (CURRENT_WORKER_EXITED.test(line)) this.workerExited(run, line);
        this.options.onOutput?.(line, stream);
      });
    }
    let gone = false;
    const onGone = (code: number | null, signal: NodeJS.Signals | null, err?: Error) => {
      if (gone) return;
      gone = true;
      if (err)
        this.recent.push(
          (err as NodeJS.ErrnoException).code === "ENOENT"
            ? `${haproxyBin} not found; install it: ${HAPROXY_INSTALL_HINT}`
            : err.message,
        );
      markExited();
      this.exited(run, code, signal);
    };
    // A spawn failure (e.g. ENOENT) emits "error" and possibly no "exit".
    child.on("error", (err) => onGone(null, null, err));
    child.on("exit", (code, signal) => onGone(code, signal));
    return run;
  }

  private readConfig(): string | null {
    try {
      return readFileSync(this.options.configPath, "utf8");
    } catch {
      return null;
    }
  }

  private restarting(info: RestartInfo): void {
    this.restarts++;
    this.lastRestart = { ...info, at: new Date().toISOString() };
    this.options.onRestart?.(info);
  }

  private exited(run: MasterRun, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.current !== run) return;
    this.current = undefined;
    if (this.stopping || !this.supervised) return;
    const diedAt = Date.now();
    const servedMs = run.servingSince === undefined ? null : diedAt - run.servingSince;
    const configServedMs = run.configSince === undefined ? null : diedAt - run.configSince;
    const policy = {
      delayMs: this.options.restartDelayMs,
      stableMs: this.options.restartStableMs,
      backoffInitialMs: this.options.restartInitialDelayMs,
      backoffMaxMs: this.options.restartMaxDelayMs,
    };
    const { quickCrashes, configKnownGood, delayMs } = decideRestart(policy, this.history, configServedMs);
    this.history = { quickCrashes, configKnownGood };
    const how = signal ? `signal ${signal}` : code === null ? (this.recent.at(-1) ?? "spawn failure") : `code ${code}`;
    const lived = servedMs === null ? "before it served" : `after serving ${seconds(servedMs)}`;
    const streak =
      quickCrashes > 1 ? ` (${quickCrashes} quick crashes in a row: its config or environment may be crashing it)` : "";
    const reason = `HAProxy master ${run.child.pid ?? "(not started)"} exited unexpectedly (${how}) ${lived}${streak}; restarting ${delayMs > 0 ? `in ${delayMs} ms` : "now"}`;
    this.pendingRestart = { at: new Date(diedAt + delayMs).toISOString(), delayMs, quickCrashes };
    this.restarting({ cause: "master-exited", reason, code, signal, servedMs, quickCrashes, delayMs });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.pendingRestart = null;
      if (this.stopping) return;
      const configText = this.readConfig();
      const next = this.spawnMaster();
      // No deadline: a master that is slow to serve must still be reported once it does, or the
      // agent would go on diffing against the runtime state the dead master had.
      this.serving(next, Infinity)
        .then((ok) => {
          if (ok && this.current === next && !this.stopping)
            this.options.onRestarted?.(configText, { cause: "master-exited", downMs: Date.now() - diedAt });
        })
        // A throwing callback is a bug to see, not a reason for an unhandled rejection to end the agent.
        .catch((err: unknown) => process.emitWarning(`onRestarted failed: ${(err as Error).stack ?? String(err)}`));
    }, delayMs);
  }

  /**
   * The master said its current worker exited. When the master then stays up without a worker
   * (see the class comment), reload it, which forks a new worker on the config file; a master
   * that does not get a worker that way is killed, and restarted like any that died.
   */
  private workerExited(run: MasterRun, line: string): void {
    if (!this.supervised || this.stopping || this.current !== run) return;
    const diedAt = Date.now();
    const servedMs = run.servingSince === undefined ? null : diedAt - run.servingSince;
    void this.queued(async () => {
      await sleep(WORKER_LOST_GRACE_MS);
      if (this.current !== run || this.stopping || !this.running || run.exitingOnFailure) return;
      const status = await showProc(this.options.masterSocket, { timeoutMs: 1000 }).catch(() => undefined);
      if (!status || status.master.pid !== run.child.pid || status.workers.length > 0) return;
      const reason = `HAProxy's current worker exited under a live master ${run.child.pid} (${line.replace(/^\[\w+\]\s+\(\d+\)\s*:\s*/, "")}), which does not fork another by itself; reloading it now`;
      this.restarting({
        cause: "worker-lost",
        reason,
        code: null,
        signal: null,
        servedMs,
        quickCrashes: this.history.quickCrashes,
        delayMs: 0,
      });
      const configText = this.readConfig();
      const result = await reload(this.options.masterSocket, {
        timeoutMs: this.parseWait(this.options.reloadTimeoutMs),
      }).catch(() => undefined);
      if (this.current !== run || this.stopping) return;
      if (result?.ok && result.status.workers.length > 0) {
        run.servingSince = run.configSince = Date.now();
        this.options.onRestarted?.(configText, { cause: "worker-lost", downMs: Date.now() - diedAt });
        return;
      }
      run.child.kill("SIGKILL");
    }).catch((err: unknown) =>
      process.emitWarning(`replacing a lost HAProxy worker failed: ${(err as Error).stack ?? String(err)}`),
    );
  }

  /** True once `run`'s master answers with a worker; false if it exits, is replaced or stopped, or times out. */
  private async serving(run: MasterRun, timeoutMs = this.parseWait(this.options.startTimeoutMs)): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (
      this.current === run &&
      !this.stopping &&
      run.child.exitCode === null &&
      run.child.signalCode === null &&
      Date.now() < deadline
    ) {
      const status = await showProc(this.options.masterSocket, { timeoutMs: 1000 }).catch(() => undefined);
      if (status && status.master.pid === run.child.pid && status.workers.length > 0) {
        run.servingSince ??= Date.now();
        run.configSince ??= run.servingSince;
        return this.current === run;
      }
      await sleep(50);
    }
    return false;
  }
}
