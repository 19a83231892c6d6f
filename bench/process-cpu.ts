/*
 * CPU time of a process tree by role: what each part of the local stack (s3rver, the functions,
 * the agent, HAProxy, the stack's process with the API emulator and the event bridge, the demo
 * backends, the bench's own process) spent over a stretch of a benchmark. On a shared core a
 * tail is whoever was runnable at the time, so the work per change of each process says where
 * the core went.
 *
 * Read from proc(5): utime + stime of each live descendant. A process that exits within the
 * stretch takes its time with it (a reload's old worker, a `haproxy -c`): the table says so.
 */

import { readdirSync, readFileSync } from "node:fs";

// proc(5) counts in USER_HZ clock ticks, 100 per second on every Linux ABI.
const TICK_MS = 10;

export interface ProcessCpu {
  /** pid → role and CPU milliseconds so far. */
  byPid: Map<number, { role: string; ms: number }>;
}

function stat(pid: number): { ppid: number; ms: number; comm: string } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = text.lastIndexOf(")");
    const fields = text.slice(close + 2).split(" ");
    return {
      comm: text.slice(text.indexOf("(") + 1, close),
      ppid: Number(fields[1]),
      ms: (Number(fields[11]) + Number(fields[12])) * TICK_MS,
    };
  } catch {
    return null;
  }
}

function role(pid: number, comm: string, rootPid: number): string {
  if (pid === rootPid) return "bench process (its writes to the API, client polls, trace)";
  if (comm === "haproxy") return "HAProxy";
  let args: string;
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return comm;
  }
  if (args.includes("for (;;)")) return "busy core";
  if (args.includes("s3rver")) return "s3rver";
  const target = / --target (\S+)/.exec(args);
  if (target) return `${target[1]} function`;
  if (/servicelb\.js agent\b/.test(args)) return "agent";
  if (args.includes("demo-backends")) return "demo backends (they answer the health checks)";
  // The local stack's own process: npm start's (shared/dev/main.js) or the bench's (e2e-stack.js).
  if (/(e2e-stack|dev\/main)\.js\b/.test(args)) return "local stack (API emulator, event bridge, log relay)";
  return comm;
}

/** Every live descendant of `rootPid` (and it), with its role and CPU time. */
export function processCpu(rootPid = process.pid): ProcessCpu {
  const stats = new Map<number, NonNullable<ReturnType<typeof stat>>>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const s = stat(Number(entry));
    if (s) stats.set(Number(entry), s);
  }
  const inTree = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
      if (p === rootPid) return true;
      p = stats.get(p)?.ppid ?? 0;
    }
    return false;
  };
  const byPid = new Map<number, { role: string; ms: number }>();
  for (const [pid, s] of stats) if (inTree(pid)) byPid.set(pid, { role: role(pid, s.comm, rootPid), ms: s.ms });
  return { byPid };
}

/** CPU milliseconds by role between two readings, largest first; processes gone by `to` are not counted. */
export function cpuBetween(from: ProcessCpu, to: ProcessCpu): Array<{ role: string; ms: number }> {
  const byRole = new Map<string, number>();
  for (const [pid, now] of to.byPid) {
    const spent = now.ms - (from.byPid.get(pid)?.ms ?? 0);
    byRole.set(now.role, (byRole.get(now.role) ?? 0) + spent);
  }
  return [...byRole].map(([role, ms]) => ({ role, ms })).sort((a, b) => b.ms - a.ms);
}
