/*
 * The stage trace a local stack writes (SERVICELB_TRACE_FILE, adapters/stage-trace.ts): one JSON
 * record per line from every process of the stack, read back in time order.
 */

import { readFileSync } from "node:fs";

export interface TraceRecord {
  at: number;
  proc: string;
  ev: string;
  [k: string]: unknown;
}

/** The records of the trace file at `path`, oldest first; none when it does not exist (yet). */
export function readTrace(path: string): TraceRecord[] {
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as TraceRecord)
    .sort((a, b) => a.at - b.at);
}
