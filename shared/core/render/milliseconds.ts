/*
 * Durations as servicelb reports them (stats of a render, a pass's stage timings in its log line,
 * `render --format json`): milliseconds to two decimals, finer than any figure worth reading.
 */

export function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** Milliseconds since `start`, a performance.now() reading. */
export function msSince(start: number): number {
  return roundMs(performance.now() - start);
}
