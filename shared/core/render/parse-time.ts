/*
 * How long HAProxy may take over a config of a given size: `haproxy -c`, a start and a reload all
 * parse the whole file, and parsing grows with the bytes. A fixed timeout that fits 1,000
 * Services fails a node at 50,000 on a busy core, so every such wait is the larger of its
 * setting and PARSE_MS_PER_MIB for each MiB of config: about three times the slowest parse
 * bench/node-capacity measured on a loaded 2-core machine (BENCHMARKS.md, "Node capacity").
 */

export const PARSE_MS_PER_MIB = 2000;

/** The wait for HAProxy to parse a config of `bytes`: at least `settingMs`. */
export function parseTimeoutMs(bytes: number, settingMs: number): number {
  return Math.max(settingMs, Math.ceil((bytes / 2 ** 20) * PARSE_MS_PER_MIB));
}
