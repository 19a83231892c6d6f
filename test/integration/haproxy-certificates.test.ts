import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CertificatePayloadTooLarge,
  listCertificates,
  replaceCertificate,
  SET_SSL_CERT_MAX_BYTES,
  servedFingerprint,
} from "../../shared/adapters/haproxy/certificates.js";
import { cliPayload } from "../../shared/adapters/haproxy/cli.js";
import { RuntimeApiError } from "../../shared/adapters/haproxy/runtime.js";
import { requireHaproxy, type RunningHaproxy, runHaproxy } from "../support/haproxy.js";
import { freePort } from "../support/net.js";
import { type IssuedCert, issueServerCert, makePki, type TestPki } from "../support/tls.js";

// The runtime API's certificate transactions on a real HAProxy 2.6: set + commit swaps what a
// fresh handshake gets, a refused commit leaves the old certificate and no transaction open, and
// a transaction someone left open does not capture the next set (2.6 holds one at a time).

let dir: string;
let pki: TestPki;
let haproxy: RunningHaproxy;
let port: number;
let socket: string;
let first: IssuedCert;
let second: IssuedCert;
let otherName: IssuedCert;
const pemLines = (text: string) => text.split("\n").filter((l) => l !== "");
const fingerprintOf = (c: IssuedCert) => new X509Certificate(c.cert).fingerprint.replaceAll(":", "");

beforeAll(async () => {
  requireHaproxy();
  dir = mkdtempSync(join(tmpdir(), "haproxy-certs-"));
  pki = makePki(dir);
  first = issueServerCert(dir);
  second = issueServerCert(dir);
  otherName = issueServerCert(dir, "other.test");
  writeFileSync(join(dir, "other.pem"), otherName.cert + otherName.key);
  port = await freePort();
  socket = join(dir, "admin.sock");
  haproxy = await runHaproxy(
    [
      "global",
      `    stats socket ${socket} mode 600 level admin`,
      "defaults",
      "    mode http",
      "    timeout connect 1s",
      "    timeout client 5s",
      "    timeout server 5s",
      "frontend https",
      `    bind 127.0.0.1:${port} ssl crt ${pki.serverPem} crt ${join(dir, "other.pem")}`,
      "    http-request return status 200",
      "",
    ].join("\n"),
    dir,
  );
});

afterAll(async () => {
  await haproxy?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function served(): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port, servername: "lb.test", ca: pki.ca }, () => {
      resolve(s.getPeerCertificate().fingerprint.replaceAll(":", ""));
      s.destroy();
    });
    s.on("error", reject);
  });
}

describe("replaceCertificate", () => {
  it("swaps the certificate a fresh handshake gets, and says what HAProxy serves", async () => {
    await replaceCertificate(socket, pki.serverPem, pemLines(first.cert + first.key));
    expect(await served()).toBe(fingerprintOf(first));
    expect(await servedFingerprint(socket, pki.serverPem)).toBe(fingerprintOf(first));
    expect((await listCertificates(socket)).transaction).toBeNull();
  });

  it("leaves the old certificate and no transaction when HAProxy refuses the commit", async () => {
    const before = await served();
    // A key that is not the certificate's: 2.6 takes it into the transaction and refuses it at the commit.
    await expect(replaceCertificate(socket, pki.serverPem, pemLines(second.cert + first.key))).rejects.toThrow(
      RuntimeApiError,
    );
    expect(await served()).toBe(before);
    expect((await listCertificates(socket)).transaction).toBeNull();
  });

  it("aborts a transaction left open first, instead of setting into it", async () => {
    const other = join(dir, "other.pem");
    await cliPayload(socket, `set ssl cert ${other}`, pemLines(first.cert + first.key));
    expect((await listCertificates(socket)).transaction).toBe(other);
    await replaceCertificate(socket, pki.serverPem, pemLines(second.cert + second.key));
    expect(await servedFingerprint(socket, pki.serverPem)).toBe(fingerprintOf(second));
    // The open transaction for other.pem was dropped, not committed.
    expect(await servedFingerprint(socket, other)).toBe(fingerprintOf(otherName));
    expect((await listCertificates(socket)).transaction).toBeNull();
  });

  it("refuses a name HAProxy did not load, and contents too large for one command, sending nothing", async () => {
    await expect(replaceCertificate(socket, join(dir, "nope.pem"), pemLines(first.cert + first.key))).rejects.toThrow(
      /not referenced by the configuration/,
    );
    const chain = pemLines(first.cert + first.key + first.cert.repeat(40));
    const err = await replaceCertificate(socket, pki.serverPem, chain).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CertificatePayloadTooLarge);
    expect((err as CertificatePayloadTooLarge).bytes).toBeGreaterThan(SET_SSL_CERT_MAX_BYTES);
    expect((await listCertificates(socket)).transaction).toBeNull();
  });
});

describe("cliPayload", () => {
  it("refuses an empty line, a line break or a ';' in the payload: HAProxy would run what follows", async () => {
    for (const bad of [["a", "", "show info"], ["a\nshow info"], ["a;show info"], []])
      await expect(cliPayload(socket, `set ssl cert ${pki.serverPem}`, bad)).rejects.toThrow(/refusing CLI payload/);
    await expect(cliPayload(socket, "set ssl cert x;show info", ["a"])).rejects.toThrow(/refusing CLI command/);
  });
});
