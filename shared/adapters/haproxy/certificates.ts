/*
 * The certificates HAProxy serves, through its runtime API (HAProxy 2.6): which it loaded and
 * when each expires (`show ssl cert`: what clients get, whatever the files on disk say now), and
 * the swap of one for new contents without a reload (`set ssl cert` + `commit ssl cert`).
 */

import { RuntimeApiError, runtimeCommand } from "./runtime.js";
import { cliPayload, type CliOptions } from "./cli.js";

export interface CertificateExpiry {
  /** The certificate's name in HAProxy: the file it was loaded from. */
  certificate: string;
  notAfter: Date;
}

// The CLI splits on spaces; a name outside this set is not asked about rather than sent escaped.
const NAME = /^[A-Za-z0-9_./@:+=,-]+$/;

/** What `show ssl cert` lists: the committed certificates, and the one transaction open if any. */
export interface CertificateList {
  names: string[];
  /** The certificate of the transaction open (2.6 holds one at a time), or null. */
  transaction: string | null;
}

export async function listCertificates(socketPath: string, opts?: CliOptions): Promise<CertificateList> {
  const lines = (await runtimeCommand(socketPath, "show ssl cert", opts)).split("\n");
  // "# filename" heads the list; "*name" under "# transaction" is a transaction not committed yet.
  const open = lines.find((l) => l.startsWith("*"));
  return {
    names: lines.filter((l) => l !== "" && !l.startsWith("#") && !l.startsWith("*") && NAME.test(l)),
    transaction: open === undefined ? null : open.slice(1),
  };
}

/** The committed certificates HAProxy holds, by the file each was loaded from. */
export async function certificateNames(socketPath: string, opts?: CliOptions): Promise<string[]> {
  return (await listCertificates(socketPath, opts)).names;
}

/** Every committed certificate HAProxy holds and its notAfter; one without a readable date is left out. */
export async function certificateExpiries(socketPath: string, opts?: CliOptions): Promise<CertificateExpiry[]> {
  const names = await certificateNames(socketPath, opts);
  const out: CertificateExpiry[] = [];
  for (const certificate of names) {
    const detail = await runtimeCommand(socketPath, `show ssl cert ${certificate}`, opts);
    const notAfter = new Date(/^notAfter: (.+)$/m.exec(detail)?.[1] ?? "");
    if (!Number.isNaN(notAfter.getTime())) out.push({ certificate, notAfter });
  }
  return out;
}

function checkCertificateName(name: string): void {
  if (!NAME.test(name)) throw new Error(`not a certificate name the runtime API takes: ${JSON.stringify(name)}`);
}

/** The SHA-1 fingerprint (upper-case hex, no colons) of the certificate HAProxy serves under `name`. */
export async function servedFingerprint(socketPath: string, name: string, opts?: CliOptions): Promise<string> {
  checkCertificateName(name);
  const cmd = `show ssl cert ${name}`;
  const answer = await runtimeCommand(socketPath, cmd, opts);
  const fingerprint = /^SHA1 FingerPrint: ([0-9A-F]{40})$/m.exec(answer)?.[1];
  if (fingerprint === undefined) throw new RuntimeApiError(cmd, answer);
  return fingerprint;
}

/**
 * The most bytes a `set ssl cert` request may take: 2.6.12 answered one of 16,245 bytes and
 * dropped one of 17,360 without an answer (tune.bufsize 16384, measured). A certificate with its
 * chain and key is 3–8 KB.
 */
export const SET_SSL_CERT_MAX_BYTES = 16_000;

/** The contents cannot go through the runtime API at all; only a reload serves them. */
export class CertificatePayloadTooLarge extends Error {
  constructor(
    readonly certificate: string,
    readonly bytes: number,
  ) {
    super(
      `${bytes} bytes, more than the ${SET_SSL_CERT_MAX_BYTES} HAProxy's runtime API takes in one command (tune.bufsize)`,
    );
    this.name = "CertificatePayloadTooLarge";
  }
}

/**
 * Replaces what HAProxy serves under `name` (a certificate it loaded) by `pem` (the lines of the
 * certificate, its chain and its key; no empty line), without a reload: `set ssl cert` opens a
 * transaction, `commit ssl cert` swaps it in for the handshakes that follow, and `abort ssl cert`
 * drops it when either fails, so the old certificate keeps serving. HAProxy 2.6 holds one
 * transaction at a time and puts a `set` for another name into the open one, so one left open (a
 * process that stopped between its set and its commit) is aborted first.
 */
export async function replaceCertificate(
  socketPath: string,
  name: string,
  pem: readonly string[],
  opts?: CliOptions,
): Promise<void> {
  checkCertificateName(name);
  const set = `set ssl cert ${name}`;
  const bytes = Buffer.byteLength(`${set} <<\n${pem.join("\n")}\n\n`);
  if (bytes > SET_SSL_CERT_MAX_BYTES) throw new CertificatePayloadTooLarge(name, bytes);
  const { transaction } = await listCertificates(socketPath, opts);
  if (transaction !== null) await abortCertificate(socketPath, transaction, opts);
  const created = await cliPayload(socketPath, set, pem, opts);
  if (created !== `Transaction created for certificate ${name}!`) {
    await abortOpen(socketPath, opts);
    throw new RuntimeApiError(set, created);
  }
  const commit = `commit ssl cert ${name}`;
  let committed: string;
  try {
    committed = await runtimeCommand(socketPath, commit, opts);
  } catch (err) {
    await abortOpen(socketPath, opts);
    throw err;
  }
  // "Committing <name>" and a dot per instance it updates, then "Success!".
  if (!/^Success!$/m.test(committed)) {
    await abortOpen(socketPath, opts);
    throw new RuntimeApiError(commit, committed.split("\n").slice(-2).join(" "));
  }
}

async function abortCertificate(socketPath: string, name: string, opts?: CliOptions): Promise<void> {
  checkCertificateName(name);
  await runtimeCommand(socketPath, `abort ssl cert ${name}`, opts);
}

/** Aborts whatever transaction is open; a failure here is not the one to report. */
async function abortOpen(socketPath: string, opts?: CliOptions): Promise<void> {
  try {
    const { transaction } = await listCertificates(socketPath, opts);
    if (transaction !== null) await abortCertificate(socketPath, transaction, opts);
  } catch {
    // The next replaceCertificate aborts it before its own set.
  }
}
