import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkCertificate } from "../../../shared/agent/certificate-pem.js";
import { type IssuedCert, issueServerCert, makePki } from "../../support/tls.js";

// What the agent checks in a renewed certificate file before HAProxy is given it, with
// certificates openssl made: parses, key matches, not expired; and what it gives HAProxy.

const PATH = "/etc/haproxy/certs/lb.pem";
const NOW = new Date();
let dir: string;
let good: IssuedCert;
let other: IssuedCert;
let expired: IssuedCert;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "servicelb-pem-"));
  makePki(dir);
  good = issueServerCert(dir);
  other = issueServerCert(dir);
  expired = issueServerCert(dir, "lb.test", { expired: true });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function reasonOf(cert: string, key: string | null = null, now = NOW): string {
  const v = checkCertificate(PATH, { cert, key }, now);
  if (v.ok) throw new Error("expected a refusal");
  return v.reason;
}

describe("checkCertificate", () => {
  it("takes a certificate with its key, and says what HAProxy will serve", () => {
    const v = checkCertificate(PATH, { cert: good.cert + good.key, key: null }, NOW);
    const x509 = new X509Certificate(good.cert);
    expect(v).toMatchObject({
      ok: true,
      fingerprint: x509.fingerprint.replaceAll(":", ""),
      serial: x509.serialNumber,
      notAfter: new Date(x509.validTo),
    });
  });

  it("gives HAProxy PEM blocks only: no empty line, no text between blocks, no CR", () => {
    const messy = `Bag Attributes\n    localKeyID: 01\n${good.cert.replaceAll("\n", "\r\n")}\n\n# key\n${good.key}\n`;
    const v = checkCertificate(PATH, { cert: messy, key: null }, NOW);
    if (!v.ok) throw new Error(v.reason);
    expect(v.pem.every((l) => l !== "" && !/[\r\n]/.test(l))).toBe(true);
    expect(`${v.pem.join("\n")}\n`).toBe(good.cert + good.key);
  });

  it("reads the key from <file>.key when the file holds none, as HAProxy does", () => {
    const v = checkCertificate(PATH, { cert: good.cert, key: good.key }, NOW);
    expect(v.ok && v.pem.join("\n")).toBe((good.cert + good.key).trimEnd());
    // A key in the file wins: <file>.key is then not read.
    expect(checkCertificate(PATH, { cert: good.cert + good.key, key: other.key }, NOW).ok).toBe(true);
  });

  it("keeps a chain: every certificate goes, the first is the one served", () => {
    const v = checkCertificate(PATH, { cert: good.cert + other.cert + good.key, key: null }, NOW);
    expect(v.ok && v.fingerprint).toBe(new X509Certificate(good.cert).fingerprint.replaceAll(":", ""));
    expect(v.ok && v.pem.filter((l) => l === "-----BEGIN CERTIFICATE-----").length).toBe(2);
  });

  it("refuses a key that is not the certificate's, in the file or beside it", () => {
    expect(reasonOf(good.cert + other.key)).toMatch(/^\/etc\/haproxy\/certs\/lb\.pem: the private key is not the key/);
    expect(reasonOf(good.cert, other.key)).toMatch(
      /^\/etc\/haproxy\/certs\/lb\.pem\.key: the private key is not the key/,
    );
  });

  it("refuses an expired certificate, with its date", () => {
    expect(reasonOf(expired.cert + expired.key)).toBe(`${PATH}: the certificate expired on 2020-01-02T00:00:00.000Z`);
    const notAfter = new Date(new X509Certificate(good.cert).validTo);
    expect(reasonOf(good.cert + good.key, null, new Date(notAfter.getTime() + 1000))).toMatch(/expired on/);
  });

  it("refuses a file without a certificate or without a key", () => {
    expect(reasonOf("not a certificate\n")).toMatch(/no certificate/);
    expect(reasonOf("")).toMatch(/no certificate/);
    expect(reasonOf(good.key)).toMatch(/no certificate/);
    expect(reasonOf(good.cert)).toMatch(/no private key, in the file or in \/etc\/haproxy\/certs\/lb\.pem\.key/);
    expect(reasonOf(good.cert + good.key + other.key)).toMatch(/2 private keys/);
  });

  it("refuses PEM that does not parse or that HAProxy cannot read", () => {
    const body = good.cert.split("\n");
    expect(reasonOf([...body.slice(0, 3), ...body.slice(5)].join("\n") + good.key)).toMatch(
      /a certificate does not parse/,
    );
    expect(reasonOf(good.cert.replace("-----END CERTIFICATE-----", "") + good.key)).toMatch(/no END line|not base64/);
    expect(reasonOf(good.cert.replace(/\n[A-Za-z0-9+/]{10}/, "\nnot base64!") + good.key)).toMatch(/not base64/);
    const encrypted =
      "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
    expect(reasonOf(good.cert + encrypted)).toMatch(/with headers \(an encrypted key\?\)/);
    expect(
      reasonOf(`${good.cert}-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n`),
    ).toMatch(/ENCRYPTED PRIVATE KEY block, which HAProxy does not take/);
    expect(reasonOf(`${good.cert}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n`)).toMatch(
      /the private key does not parse/,
    );
  });
});
