/*
 * Stage timing, an optional port for the stages bench/e2e measures: the reconcile function's entry
 * point wraps it around the steps of each pass (app/pass-trace.ts), the agent's around the stages
 * of its pull loop (app/agent-trace.ts); the local stack's parts (shared/dev/) take a StageTrace
 * where they are constructed. Nothing is traced unless an entry point wires a tracer; the entry
 * points wire the file tracer when SERVICELB_TRACE_FILE is set (bench/e2e sets it for the whole
 * local stack, and child processes inherit it).
 */

import { appendFileSync } from "node:fs";

/** Records that `event` happened now, with fields that tie it to a change (a key, a revision). */
export type StageTrace = (event: string, fields?: Record<string, unknown>) => void;

/** A StageTrace per process part (`proc`: "agent", "reconcile", "bridge", ...). */
export type StageTracer = (proc: string) => StageTrace;

export const NO_TRACE: StageTrace = () => undefined;

/** The variable the entry points read; set only by bench/e2e. */
export const TRACE_FILE_ENV = "SERVICELB_TRACE_FILE";

/**
 * Appends one JSON line {at, proc, ev, ...fields} per event to `file`. `at` is wall-clock
 * milliseconds with sub-millisecond precision, comparable across the processes of one machine.
 */
export function fileTracer(file: string): StageTracer {
  return (proc) =>
    (ev, fields = {}) => {
      try {
        // O_APPEND writes of one short line from several processes do not interleave.
        appendFileSync(
          file,
          `${JSON.stringify({ at: performance.timeOrigin + performance.now(), proc, ev, ...fields })}\n`,
        );
      } catch {
        // A trace must never break what it measures.
      }
    };
}

/** The file tracer when SERVICELB_TRACE_FILE names a file, else none. */
export function tracerFromEnv(env: NodeJS.ProcessEnv): StageTracer | undefined {
  const file = env[TRACE_FILE_ENV];
  return file ? fileTracer(file) : undefined;
}
