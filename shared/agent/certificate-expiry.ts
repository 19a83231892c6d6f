/*
 * The expiry of the certificates HAProxy serves, for servicelb_certificate_expiry_timestamp_seconds
 * (metrics.ts), read through the runtime API at most every REFRESH_MS or when the running config
 * changes or a certificate is swapped in (certificate-watch.ts): a crt-list can hold thousands,
 * each a command, and they change only with the config or a swap.
 * A scrape never fails for it: an unreadable answer keeps the last one known.
 */

import { type CertificateExpiry, certificateExpiries } from "../adapters/haproxy/certificates.js";
import { statsSocketOf } from "../core/haproxy-config/globals.js";
import type { HaproxyEnv } from "../core/haproxy-config/environment.js";
import type { RunningConfig } from "./metrics.js";

const REFRESH_MS = 5 * 60_000;

export function certificateProbe(
  running: () => RunningConfig | null,
  read: (socket: string) => Promise<CertificateExpiry[]> = certificateExpiries,
  /** Counts the certificates swapped in at run time. */
  swaps: () => number = () => 0,
  /** HAProxy's environment, with which the config's socket path is read. */
  env: HaproxyEnv = process.env,
): () => Promise<CertificateExpiry[]> {
  let last: { text: string; swaps: number; at: number; rows: CertificateExpiry[] } | null = null;
  return async () => {
    const r = running();
    if (r === null) return [];
    if (last?.text === r.text && last.swaps === swaps() && Date.now() - last.at < REFRESH_MS) return last.rows;
    const socket = statsSocketOf(r.text, env);
    if (!socket) return [];
    const swapped = swaps();
    try {
      last = { text: r.text, swaps: swapped, at: Date.now(), rows: await read(socket) };
    } catch {
      // HAProxy between workers, or gone: what it served last is still what clients got.
    }
    return last?.rows ?? [];
  };
}
