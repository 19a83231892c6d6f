import { setTimeout as sleep } from "node:timers/promises";
import { cliCommand, type CliOptions } from "./cli.js";

/** A command on the master CLI (`haproxy -W -S <socket>`); `@1 <cmd>` reaches the current worker. */
export function masterCommand(socketPath: string, cmd: string, opts?: CliOptions): Promise<string> {
  return cliCommand(socketPath, cmd, opts);
}

export interface ProcEntry {
  pid: number;
  /** For a worker: reloads it has lived through (0 = forked by the latest successful reload). */
  reloads: number;
  /** As printed, e.g. "0d00h01m05s". */
  uptime: string;
  uptimeSeconds: number;
  version: string;
}

export interface MasterEntry extends ProcEntry {
  /** Failed reloads since the last successful one: 2.6 resets it to 0 on success (measured). */
  failedReloads: number;
}

export interface ProcStatus {
  master: MasterEntry;
  /** Current worker(s): the ones serving the loaded config. */
  workers: ProcEntry[];
  /** Workers of earlier configs still finishing their connections. */
  oldWorkers: ProcEntry[];
}

function uptimeSeconds(s: string): number {
  const m = /^(\d+)d(\d+)h(\d+)m(\d+)s$/.exec(s);
  return m ? ((Number(m[1]) * 24 + Number(m[2])) * 60 + Number(m[3])) * 60 + Number(m[4]) : NaN;
}

/**
 * Parses 2.6's `show proc`, measured on 2.6.12:
 *
 *   #<PID>          <type>          <reloads>       <uptime>        <version>
 *   3888            master          6 [failed: 1]   0d00h00m30s     2.6.12-1+deb12u4
 *   # workers
 *   4062            worker          1               0d00h00m01s     2.6.12-1+deb12u4
 *   # old workers
 *   4020            worker          2               0d00h00m08s     2.6.12-1+deb12u4
 *   # programs
 *
 * Throws on anything without a master line: a master in the middle of re-executing can
 * accept a connection and close it without an answer.
 */
export function parseShowProc(text: string): ProcStatus {
  let master: MasterEntry | undefined;
  const workers: ProcEntry[] = [];
  const oldWorkers: ProcEntry[] = [];
  let section: "master" | "workers" | "old" | "other" = "master";
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) {
      const name = line.slice(1).trim();
      section =
        name === "workers" ? "workers" : name === "old workers" ? "old" : name.startsWith("<PID>") ? "master" : "other";
      continue;
    }
    const m = /^(\d+)\s+(master|worker)\s+(\d+)\s+(?:\[failed:\s*(\d+)\]\s+)?(\S+)\s*(\S*)/.exec(line);
    if (!m) continue;
    const entry: ProcEntry = {
      pid: Number(m[1]),
      reloads: Number(m[3]),
      uptime: m[5]!,
      uptimeSeconds: uptimeSeconds(m[5]!),
      version: m[6]!,
    };
    if (m[2] === "master" && section === "master") master = { ...entry, failedReloads: Number(m[4] ?? 0) };
    else if (m[2] === "worker" && section === "workers") workers.push(entry);
    else if (m[2] === "worker" && section === "old") oldWorkers.push(entry);
  }
  if (!master) throw new Error(`unexpected "show proc" answer: ${JSON.stringify(text.slice(0, 200))}`);
  return { master, workers, oldWorkers };
}

export async function showProc(socketPath: string, opts?: CliOptions): Promise<ProcStatus> {
  return parseShowProc(await masterCommand(socketPath, "show proc", opts));
}

export interface ReloadOptions {
  /** How long to wait for the master to come back with the outcome. A bind retry alone takes ~2 s. */
  timeoutMs?: number;
  /**
   * Between `show proc` attempts while the master re-executes: it refuses connections then,
   * which costs a unix-socket connect to find out. Default 10 ms.
   */
  pollIntervalMs?: number;
}

export interface ReloadResult {
  ok: boolean;
  reloadsBefore: number;
  reloadsAfter: number;
  /** `show proc` once the master had finished the reload. */
  status: ProcStatus;
  /** Why it failed, when it did. HAProxy's own reasons are on the master's stderr. */
  reason?: string;
}

/**
 * Reloads through the master CLI and reports the outcome. 2.6 answers `reload` with nothing:
 * the master re-executes itself (its CLI refuses connections meanwhile), re-reads the config
 * FILE it was started with, and only then serves its CLI again. So: poll `show proc` until the
 * master's reload counter has moved; the reload failed iff its "failed" counter is then
 * non-zero (a failed reload keeps the old worker, a successful one resets the counter).
 * The re-execution itself (parsing the config) takes what it takes; the poll adds at most
 * pollIntervalMs to it. (The master's "Loading success." line on stderr is no earlier signal:
 * its CLI goes on refusing connections for a while after it; BENCHMARKS.md, Agent, has the figure.)
 * Throws when the master cannot be reached or does not come back in time.
 */
export async function reload(
  socketPath: string,
  { timeoutMs = 15_000, pollIntervalMs = 10 }: ReloadOptions = {},
): Promise<ReloadResult> {
  const before = await showProc(socketPath);
  const deadline = Date.now() + timeoutMs;
  await masterCommand(socketPath, "reload", { timeoutMs }).catch(() => {
    // The master may exec before answering; the poll below tells what happened.
  });
  let lastError: unknown;
  for (;;) {
    const remaining = deadline - Date.now();
    try {
      const status = await showProc(socketPath, { timeoutMs: Math.max(remaining, 100) });
      if (status.master.reloads > before.master.reloads) {
        const ok = status.master.failedReloads === 0;
        return {
          ok,
          reloadsBefore: before.master.reloads,
          reloadsAfter: status.master.reloads,
          status,
          ...(ok
            ? {}
            : {
                reason: `HAProxy master reports ${status.master.failedReloads} failed reload(s) in a row; the previous worker keeps serving`,
              }),
        };
      }
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : " (reload counter unchanged)";
      throw new Error(`reload not confirmed by the HAProxy master within ${timeoutMs} ms${why}`);
    }
    await sleep(pollIntervalMs);
  }
}
