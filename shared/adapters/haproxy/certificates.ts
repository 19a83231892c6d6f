/*
 * When the certificates HAProxy serves expire, from its runtime API (`show ssl cert`, HAProxy
 * 2.6): what HAProxy loaded, which is what clients get, whatever the files on disk say now.
 */

import { runtimeCommand } from "./runtime.js";
import type { CliOptions } from "./cli.js";

export interface CertificateExpiry {
  /** The certificate's name in HAProxy: the file it was loaded from. */
  certificate: string;
  notAfter: Date;
}

// The CLI splits on spaces; a name outside this set is not asked about rather than sent escaped.
const NAME = /^[A-Za-z0-9_./@:+=,-]+$/;

/** Every committed certificate HAProxy holds and its notAfter; one without a readable date is left out. */
export async function certificateExpiries(socketPath: string, opts?: CliOptions): Promise<CertificateExpiry[]> {
  const names = (await runtimeCommand(socketPath, "show ssl cert", opts))
    .split("\n")
    // "# filename" heads the list; "*name" is a transaction not committed yet.
    .filter((l) => l !== "" && !l.startsWith("#") && !l.startsWith("*") && NAME.test(l));
  const out: CertificateExpiry[] = [];
  for (const certificate of names) {
    const detail = await runtimeCommand(socketPath, `show ssl cert ${certificate}`, opts);
    const notAfter = new Date(/^notAfter: (.+)$/m.exec(detail)?.[1] ?? "");
    if (!Number.isNaN(notAfter.getTime())) out.push({ certificate, notAfter });
  }
  return out;
}
