import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { A, agentWorld } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { freePort } from "../support/net.js";
import { makePki } from "../support/tls.js";

// servicelb_certificate_expiry_timestamp_seconds from a real HAProxy's runtime API: the notAfter
// of the certificate it loaded, by the file it was loaded from, as openssl reads the same file.

const world = agentWorld();

describe("servicelb_certificate_expiry_timestamp_seconds", () => {
  it("is the notAfter of each certificate HAProxy serves", async () => {
    const dir = mkdtempSync(join(tmpdir(), "servicelb-pki-"));
    world.cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const pki = makePki(dir);
    const n = await world.node({ sslCert: pki.serverPem, httpsPort: await freePort() });
    await n.publish(
      [service("web", [{ port: 80, targetPort: world.pods.port }]), slice("web", [{ port: world.pods.port }], [A])],
      100,
    );
    const agent = await world.start(n);
    const page = await (await fetch(`${agent.url}/metrics`)).text();
    const line = page.split("\n").find((l) => l.startsWith("servicelb_certificate_expiry_timestamp_seconds{"));
    expect(line).toBe(
      `servicelb_certificate_expiry_timestamp_seconds{certificate="${pki.serverPem}"} ${notAfter(pki.serverPem)}`,
    );
  });
});

/** The certificate's notAfter as Unix seconds, by openssl. */
function notAfter(pem: string): number {
  const out = execFileSync("openssl", ["x509", "-enddate", "-noout", "-in", pem], { encoding: "utf8" });
  return Date.parse(out.trim().replace(/^notAfter=/, "")) / 1000;
}
