/* HAProxy times as servicelb accepts them: what a timeout annotation or flag may say. */

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
export const MAX_TIMEOUT_MS = 24 * 3600 * 1000;
export const TIMEOUT_GRAMMAR = "a time between 1ms and 24h with a unit (ms, s, m, h, d), such as 500ms or 30s";

/** An HAProxy time with a unit, 1 ms to 24 h, without leading zeros (`0500ms` → `500ms`); null otherwise. */
export function parseTimeout(value: string): string | null {
  const m = /^([0-9]{1,9})(ms|s|m|h|d)$/.exec(value);
  const n = m ? Number(m[1]) : 0;
  if (!m || n === 0 || n * UNIT_MS[m[2] as keyof typeof UNIT_MS] > MAX_TIMEOUT_MS) return null;
  return `${n}${m[2]}`;
}
