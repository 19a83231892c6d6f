/*
 * What Linux's /proc says of a process: whether it runs, whether it is HAProxy, and the most open
 * files it may have. The supervisor (process.ts) and the agent (its orphaned master, its node's
 * descriptors) ask.
 */

import { readFileSync } from "node:fs";

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

/**
 * Linux: the hard RLIMIT_NOFILE of a process, the most it may raise its own limit to (HAProxy
 * raises its soft limit itself); null when unknown or unlimited.
 */
export function openFileLimit(pid: number | "self" = "self"): number | null {
  try {
    const line = /^Max open files\s+\S+\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
    return line && /^\d+$/.test(line[1]!) ? Number(line[1]) : null;
  } catch {
    return null;
  }
}
