import { appendFileSync } from "node:fs";

/**
 * Stage timestamps for bench/e2e: when SERVICELB_TRACE_FILE is set (the bench sets it for the
 * whole local stack, and child processes inherit it), each call appends one JSON line
 * {at, proc, ev, ...fields} to that file. `at` is wall-clock milliseconds with sub-millisecond
 * precision, comparable across the processes of one machine. Unset (always, outside the bench):
 * one string comparison, nothing written.
 */
const FILE = process.env.SERVICELB_TRACE_FILE;

export const tracing = FILE !== undefined && FILE !== "";

export function traceNow(): number {
  return performance.timeOrigin + performance.now();
}

export function trace(proc: string, ev: string, fields: Record<string, unknown> = {}): void {
  if (!tracing) return;
  try {
    // O_APPEND writes of one short line from several processes do not interleave.
    appendFileSync(FILE!, `${JSON.stringify({ at: traceNow(), proc, ev, ...fields })}\n`);
  } catch {
    // A trace must never break what it measures.
  }
}
