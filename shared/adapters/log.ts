import { pino, type Logger } from "pino";

export type { Logger };

/**
 * One JSON logger for every process. LOG_LEVEL=silent keeps test output clean;
 * logs go to stderr so that stdout stays free for command output (render, history, diff).
 */
export function createLogger(name: string, level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({ name, level, base: { name } }, pino.destination(2));
}
