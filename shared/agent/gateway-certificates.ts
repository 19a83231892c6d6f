/*
 * The certificate files of Gateway HTTPS listeners this node holds (docs/gateway-api.md#certificates):
 * `<--gateway-cert-dir>/<namespace>/<name>.pem` stands for the certificateRef to Secret
 * `<namespace>/<name>`, the certificate and its key (or the key in `<name>.pem.key` beside it, as
 * HAProxy 2.6 reads it). Each look checks every file that changed as HAProxy would load it
 * (certificate-pem.ts) and keeps the refs of those that pass, which the status report lists: the
 * reconcile function binds a listener only with certificates every node holds, so a config never
 * names a file a node lacks or cannot load. Names go to the store, never contents.
 */

import { readdir } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../adapters/log.js";
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from "../core/kubernetes/k8s-names.js";
import { errorMessage } from "../core/error-message.js";
import { checkCertificate } from "./certificate-pem.js";
import { type CertificateFiles, NODE_FILES } from "./certificate-watch.js";

/** The directory as the scan reads it: entries that are directories, entries that are files, contents. */
export interface CertificateDir extends CertificateFiles {
  /** The names in `path`, or null when it does not exist. */
  list(path: string): Promise<string[] | null>;
}

function missing(err: unknown): boolean {
  return ["ENOENT", "ENOTDIR"].includes((err as NodeJS.ErrnoException).code ?? "");
}

export const NODE_CERTIFICATE_DIR: CertificateDir = {
  async list(path) {
    try {
      return await readdir(path);
    } catch (err) {
      if (missing(err)) return null;
      throw err;
    }
  },
  signature: NODE_FILES.signature,
  async read(path) {
    try {
      return await NODE_FILES.read(path);
    } catch (err) {
      // A directory where a certificate's file should be is no certificate.
      if ((err as NodeJS.ErrnoException).code === "EISDIR") return null;
      throw err;
    }
  },
};

/** A file that is not served, and why: logged when it first fails. */
export interface RefusedCertificate {
  ref: string;
  reason: string;
}

export interface CertificateScan {
  /** The refs (`namespace/name`) of the files that pass, sorted. */
  held: string[];
  refused: RefusedCertificate[];
}

/**
 * What a file and its `.key` were found to be, by their signatures: a look parses only files that
 * changed (a directory of many certificates is looked at every few seconds). An expiry is
 * judged again on every look.
 */
export type CheckedFiles = Map<string, { signature: string; verdict: { notAfter: Date } | { reason: string } }>;

/**
 * One look at the directory, at `now`. A directory that does not exist holds nothing. `checked`:
 * the verdicts of the last look, updated to this one's.
 */
export async function scanGatewayCertificates(
  dir: string,
  files: CertificateDir = NODE_CERTIFICATE_DIR,
  now: Date = new Date(),
  checked: CheckedFiles = new Map(),
): Promise<CertificateScan> {
  const seen = new Set<string>();
  const held: string[] = [];
  const refused: RefusedCertificate[] = [];
  for (const namespace of ((await files.list(dir)) ?? []).sort()) {
    if (!DNS1123_LABEL.test(namespace)) continue;
    for (const file of ((await files.list(join(dir, namespace))) ?? []).sort()) {
      const name = file.endsWith(".pem") ? file.slice(0, -".pem".length) : null;
      // Secret names are DNS-1123 subdomains: anything else is no certificateRef's file.
      if (name === null || name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) continue;
      const path = join(dir, namespace, file);
      const own = await files.signature(path);
      if (own === null) continue;
      const signature = `${own} ${await files.signature(`${path}.key`)}`;
      let known = checked.get(path);
      if (known?.signature !== signature) {
        const cert = await files.read(path);
        if (cert === null) continue;
        const v = checkCertificate(path, { cert, key: await files.read(`${path}.key`) }, now);
        known = { signature, verdict: v.ok ? { notAfter: v.notAfter } : { reason: v.reason } };
        checked.set(path, known);
      }
      seen.add(path);
      const ref = `${namespace}/${name}`;
      const { verdict } = known;
      if ("reason" in verdict) refused.push({ ref, reason: verdict.reason });
      else if (verdict.notAfter.getTime() <= now.getTime())
        refused.push({ ref, reason: `${path}: the certificate expired on ${verdict.notAfter.toISOString()}` });
      else held.push(ref);
    }
  }
  for (const path of checked.keys()) if (!seen.has(path)) checked.delete(path);
  return { held, refused };
}

/** The last look's refs, and a look that tells the caller when they changed. */
export class GatewayCertificates {
  private last: string[] = [];
  private refusedBefore = new Map<string, string>();
  private readonly checked: CheckedFiles = new Map();

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
    private readonly files: CertificateDir = NODE_CERTIFICATE_DIR,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The refs of the files that passed the last look. */
  held(): string[] {
    return this.last;
  }

  /** Looks again; true when the refs held changed. A look that fails keeps the last refs. */
  async check(): Promise<boolean> {
    let scan: CertificateScan;
    try {
      scan = await scanGatewayCertificates(this.dir, this.files, this.now(), this.checked);
    } catch (err) {
      this.log.warn(
        { dir: this.dir, err: errorMessage(err) },
        "cannot read --gateway-cert-dir: the last certificates stand",
      );
      return false;
    }
    const refused = new Map(scan.refused.map((r) => [r.ref, r.reason]));
    for (const [ref, reason] of refused)
      if (this.refusedBefore.get(ref) !== reason)
        this.log.warn({ certificate: ref, reason }, "a Gateway certificate file is not served");
    this.refusedBefore = refused;
    const changed = scan.held.join("\n") !== this.last.join("\n");
    if (changed) this.log.info({ certificates: scan.held }, "the Gateway certificates this node holds changed");
    this.last = scan.held;
    return changed;
  }
}
