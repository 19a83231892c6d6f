import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { HAPROXY_INSTALL_HINT } from "./check.js";
import { reload, showProc, type ReloadResult } from "./master.js";

export interface RestartInfo {
  /** e.g. "HAProxy master 1234 exited unexpectedly (signal SIGKILL)". */
  reason: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Consecutive restarts; back to 1 once a master had stayed up for restartResetAfterMs. */
  attempt: number;
  /** Wait before this restart. */
  delayMs: number;
}

export interface HaproxyProcessOptions {
  /** The master re-reads this same path on every reload: write the new config here first. */
  configPath: string;
  masterSocket: string;
  haproxyBin?: string;
  /** Every line HAProxy (master and workers) writes, for the caller's log. */
  onOutput?: (line: string, stream: "stdout" | "stderr") => void;
  /** Called when the master died on its own, before the restart that follows after info.delayMs. */
  onRestart?: (info: RestartInfo) => void;
  /**
   * Called once a master restarted after onRestart serves (answers with a worker), with the
   * config file's text as it was when the master was started (null: unreadable). It runs that
   * file's config: runtime API changes made to the dead one are gone.
   */
  onRestarted?: (configText: string | null) => void;
  restartInitialDelayMs?: number;
  restartMaxDelayMs?: number;
  restartResetAfterMs?: number;
  /** Soft stop (SIGUSR1) lets connections finish for this long before SIGTERM. */
  stopGraceMs?: number;
  /** After SIGTERM, this long before SIGKILL of the master and its workers. */
  killGraceMs?: number;
  startTimeoutMs?: number;
  reloadTimeoutMs?: number;
}

interface Running {
  child: ChildProcess;
  startedAt: number;
  exited: Promise<void>;
  /** Exit plus end of its output pipes, which workers may hold open after the master is gone. */
  closed: Promise<void>;
}

const RECENT_LINES = 20;

/** Linux: a pid that is gone or a zombie is not running (zombies are reaped by whoever adopted them, maybe never). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** True when `pid` is an HAProxy process (a pid read earlier may since have been reused). */
export function isHaproxy(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "haproxy";
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves true if p settles within ms. */
function within(p: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    void p.then(() => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/**
 * HAProxy in master-worker mode as a supervised foreground child: `haproxy -W -S <sock> -f <cfg>`.
 * Foreground (no -D) so that its death is an exit event here, not a stale pid file.
 */
export class HaproxyProcess {
  private readonly o: Required<Omit<HaproxyProcessOptions, "onOutput" | "onRestart" | "onRestarted">> & Pick<HaproxyProcessOptions, "onOutput" | "onRestart" | "onRestarted">;
  private current: Running | undefined;
  private supervised = false;
  private stopping = false;
  private attempt = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private reloadQueue: Promise<unknown> = Promise.resolve();
  private readonly recent: string[] = [];

  constructor(options: HaproxyProcessOptions) {
    this.o = {
      haproxyBin: "haproxy",
      restartInitialDelayMs: 500,
      restartMaxDelayMs: 30_000,
      restartResetAfterMs: 60_000,
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

  /** Starts HAProxy and resolves once its master answers with a worker; rejects (no restart) if it exits first. */
  async start(): Promise<void> {
    if (this.current || this.restartTimer) throw new Error("HAProxy is already started");
    this.stopping = false;
    this.supervised = false;
    this.attempt = 0;
    this.recent.length = 0;
    const run = this.spawnMaster();
    const deadline = Date.now() + this.o.startTimeoutMs;
    for (;;) {
      if (!run.child.pid || run.child.exitCode !== null || run.child.signalCode !== null) {
        await within(run.closed, 1000); // its last words are the error message
        throw new Error(`HAProxy exited during start-up:\n${this.recent.join("\n")}`);
      }
      const status = await showProc(this.o.masterSocket, { timeoutMs: 1000 }).catch(() => undefined);
      // A stale socket of an earlier master must not pass for this one.
      if (status && status.master.pid === run.child.pid && status.workers.length > 0) break;
      if (Date.now() > deadline) {
        run.child.kill("SIGKILL");
        await run.exited;
        throw new Error(`HAProxy did not become ready within ${this.o.startTimeoutMs} ms:\n${this.recent.join("\n")}`);
      }
      await sleep(50);
    }
    this.supervised = true;
  }

  /** Reloads via the master socket, one at a time; `ok: false` means the old worker kept serving. */
  reload(): Promise<ReloadResult> {
    const run = () => {
      if (!this.running) return Promise.reject(new Error("HAProxy is not running"));
      return reload(this.o.masterSocket, { timeoutMs: this.o.reloadTimeoutMs });
    };
    const result = this.reloadQueue.then(run, run);
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
    await this.reloadQueue;
    const run = this.current;
    if (!run) return;
    const workers = await showProc(this.o.masterSocket, { timeoutMs: 1000 }).then(
      (s) => [...s.workers, ...s.oldWorkers].map((w) => w.pid),
      () => [] as number[],
    );
    run.child.kill("SIGUSR1");
    if (await within(run.exited, this.o.stopGraceMs)) return;
    run.child.kill("SIGTERM");
    if (await within(run.exited, this.o.killGraceMs)) return;
    run.child.kill("SIGKILL");
    for (const pid of workers) if (processAlive(pid) && isHaproxy(pid)) process.kill(pid, "SIGKILL");
    await run.exited;
  }

  private spawnMaster(): Running {
    const { haproxyBin, masterSocket, configPath } = this.o;
    const child = spawn(haproxyBin, ["-W", "-S", masterSocket, "-f", configPath], { stdio: ["ignore", "pipe", "pipe"] });
    let markExited!: () => void;
    const run: Running = {
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
        this.o.onOutput?.(line, stream);
      });
    }
    let gone = false;
    const onGone = (code: number | null, signal: NodeJS.Signals | null, err?: Error) => {
      if (gone) return;
      gone = true;
      if (err) this.recent.push((err as NodeJS.ErrnoException).code === "ENOENT" ? `${haproxyBin} not found; install it: ${HAPROXY_INSTALL_HINT}` : err.message);
      markExited();
      this.exited(run, code, signal);
    };
    // A spawn failure (e.g. ENOENT) emits "error" and possibly no "exit".
    child.on("error", (err) => onGone(null, null, err));
    child.on("exit", (code, signal) => onGone(code, signal));
    return run;
  }

  private exited(run: Running, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.current !== run) return;
    this.current = undefined;
    if (this.stopping || !this.supervised) return;
    if (Date.now() - run.startedAt >= this.o.restartResetAfterMs) this.attempt = 0;
    this.attempt++;
    const delayMs = Math.min(this.o.restartInitialDelayMs * 2 ** (this.attempt - 1), this.o.restartMaxDelayMs);
    const how = signal ? `signal ${signal}` : code === null ? this.recent.at(-1) ?? "spawn failure" : `code ${code}`;
    const reason = `HAProxy master ${run.child.pid ?? "(not started)"} exited unexpectedly (${how}); restarting in ${delayMs} ms`;
    this.o.onRestart?.({ reason, code, signal, attempt: this.attempt, delayMs });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopping) return;
      let configText: string | null;
      try {
        configText = readFileSync(this.o.configPath, "utf8");
      } catch {
        configText = null;
      }
      const next = this.spawnMaster();
      // No deadline: a master that is slow to serve must still be reported once it does, or the
      // agent would go on diffing against the runtime state the dead master had.
      this.serving(next, Infinity)
        .then((ok) => {
          if (ok && this.current === next && !this.stopping) this.o.onRestarted?.(configText);
        })
        // A throwing callback is a bug to see, not a reason for an unhandled rejection to end the agent.
        .catch((err: unknown) => process.emitWarning(`onRestarted failed: ${(err as Error).stack ?? String(err)}`));
    }, delayMs);
  }

  /** True once `run`'s master answers with a worker; false if it exits, is replaced or stopped, or times out. */
  private async serving(run: Running, timeoutMs = this.o.startTimeoutMs): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.current === run && !this.stopping && run.child.exitCode === null && run.child.signalCode === null && Date.now() < deadline) {
      const status = await showProc(this.o.masterSocket, { timeoutMs: 1000 }).catch(() => undefined);
      if (status && status.master.pid === run.child.pid && status.workers.length > 0) return this.current === run;
      await sleep(50);
    }
    return false;
  }
}
