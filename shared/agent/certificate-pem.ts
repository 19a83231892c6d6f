/*
 * Whether a certificate file on the node is fit to be served, checked before HAProxy is given it
 * (certificate-watch.ts): it parses, its key matches its certificate, and it has not expired.
 * HAProxy 2.6 would take some bad files into a transaction and refuse them only at the commit,
 * and a file it never sees again until a reload would fail that reload's `haproxy -c`: a bad file
 * is told here, with its reason, and the certificate served stays.
 *
 * What passes is re-written as PEM lines, blocks only: the runtime API ends a payload at its
 * first empty line and runs what follows as commands, so no text of the file goes there as is.
 */

import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { errorMessage } from "../core/error-message.js";

/** A certificate file and, as HAProxy 2.6 loads it when the file holds no key, `<file>.key`. */
export interface CertificateSource {
  cert: string;
  /** The contents of `<file>.key`, or null when there is none. */
  key: string | null;
}

export type CertificateVerdict =
  | {
      ok: true;
      /** SHA-1 of the leaf certificate, upper-case hex without colons, as `show ssl cert` prints it. */
      fingerprint: string;
      serial: string;
      notAfter: Date;
      /** The certificate, its chain and its key as PEM lines: what `set ssl cert` is given. */
      pem: string[];
    }
  | { ok: false; reason: string };

interface PemBlock {
  label: string;
  lines: string[];
}

/** Labels HAProxy reads from a certificate file besides the certificates and the key. */
const EXTRA_LABELS = new Set(["DH PARAMETERS", "EC PARAMETERS"]);
const KEY_LABELS = new Set(["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]);
const BASE64_LINE = /^[A-Za-z0-9+/=]+$/;

/** The PEM blocks of a text, or why it is not PEM HAProxy can read. */
function pemBlocks(text: string, file: string): PemBlock[] | string {
  const blocks: PemBlock[] = [];
  let open: PemBlock | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\r$/, "").trim();
    if (open === null) {
      const begin = /^-----BEGIN ([A-Z0-9 ]+)-----$/.exec(line);
      // Text between blocks (openssl's "Bag Attributes", comments) is not PEM and not kept.
      if (begin) open = { label: begin[1]!, lines: [] };
      continue;
    }
    if (line === `-----END ${open.label}-----`) {
      if (open.lines.length === 0) return `${file}: an empty ${open.label} block`;
      blocks.push(open);
      open = null;
    } else if (line.includes(":")) {
      return `${file}: ${open.label} with headers (an encrypted key?); HAProxy reads unencrypted PEM only`;
    } else if (line !== "") {
      if (!BASE64_LINE.test(line)) return `${file}: a ${open.label} block holds a line that is not base64`;
      open.lines.push(line);
    }
  }
  if (open !== null) return `${file}: a ${open.label} block has no END line`;
  for (const b of blocks)
    if (b.label !== "CERTIFICATE" && !KEY_LABELS.has(b.label) && !EXTRA_LABELS.has(b.label))
      return `${file}: a ${b.label} block, which HAProxy does not take in a certificate file`;
  return blocks;
}

function pemLines(b: PemBlock): string[] {
  return [`-----BEGIN ${b.label}-----`, ...b.lines, `-----END ${b.label}-----`];
}

function pemText(b: PemBlock): string {
  return pemLines(b).join("\n");
}

/** Checks `source` (the file at `path`) as HAProxy would load it, at `now`. */
export function checkCertificate(path: string, source: CertificateSource, now: Date): CertificateVerdict {
  const blocks = pemBlocks(source.cert, path);
  if (typeof blocks === "string") return { ok: false, reason: blocks };
  const certs = blocks.filter((b) => b.label === "CERTIFICATE");
  if (certs.length === 0) return { ok: false, reason: `${path}: no certificate (no BEGIN CERTIFICATE block)` };
  let keys = blocks.filter((b) => KEY_LABELS.has(b.label));
  let keyFile = path;
  const all = [...blocks];
  // HAProxy 2.6 (ssl-load-extra-files all) reads `<file>.key` only when the file holds no key.
  if (keys.length === 0 && source.key !== null) {
    keyFile = `${path}.key`;
    const keyBlocks = pemBlocks(source.key, keyFile);
    if (typeof keyBlocks === "string") return { ok: false, reason: keyBlocks };
    keys = keyBlocks.filter((b) => KEY_LABELS.has(b.label));
    all.push(...keys);
  }
  if (keys.length === 0)
    return { ok: false, reason: `${path}: no private key, in the file or in ${path}.key beside it` };
  if (keys.length > 1) return { ok: false, reason: `${keyFile}: ${keys.length} private keys, HAProxy takes one` };

  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(pemText(certs[0]!));
    for (const chained of certs.slice(1)) new X509Certificate(pemText(chained));
  } catch (err) {
    return { ok: false, reason: `${path}: a certificate does not parse (${errorMessage(err)})` };
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pemText(keys[0]!));
  } catch (err) {
    return { ok: false, reason: `${keyFile}: the private key does not parse (${errorMessage(err)})` };
  }
  if (!leaf.checkPrivateKey(key))
    return { ok: false, reason: `${keyFile}: the private key is not the key of the certificate (${leaf.subject})` };
  const notAfter = new Date(leaf.validTo);
  if (notAfter.getTime() <= now.getTime())
    return { ok: false, reason: `${path}: the certificate expired on ${notAfter.toISOString()}` };
  return {
    ok: true,
    fingerprint: leaf.fingerprint.replaceAll(":", ""),
    serial: leaf.serialNumber,
    notAfter,
    pem: all.flatMap(pemLines),
  };
}
