import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { describe, expect, it } from "vitest";
import type { Agent } from "../../shared/agent/agent.js";
import { A, agentWorld, type Node } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { freePort, waitFor } from "../support/net.js";
import { issueServerCert, makePki, type TestPki } from "../support/tls.js";

// A renewed certificate file is served through the runtime API (certificate-watch.ts) by a real
// HAProxy: under a loop of fresh TLS handshakes none fails, the new certificate is what clients
// get within 10 s, and HAProxy does not reload. A bad file keeps the old one serving, reported.

const world = agentWorld();

const SERVER_NAME = "lb.test";

interface Setup {
  n: Node;
  agent: Agent;
  pki: TestPki;
  pkiDir: string;
  httpsPort: number;
}

async function start(sslCert: (pkiDir: string, pki: TestPki) => string): Promise<Setup> {
  const pkiDir = mkdtempSync(join(tmpdir(), "servicelb-pki-"));
  world.cleanups.push(() => rmSync(pkiDir, { recursive: true, force: true }));
  const pki = makePki(pkiDir, SERVER_NAME);
  const httpsPort = await freePort();
  const n = await world.node({ sslCert: sslCert(pkiDir, pki), httpsPort });
  await n.publish(
    [service("web", [{ port: 80, targetPort: world.pods.port }]), slice("web", [{ port: world.pods.port }], [A])],
    100,
  );
  const agent = await world.start(n, { certificateInterval: "500ms" });
  // The files as HAProxy loaded them are known first: what follows is a renewal, not the start.
  await waitFor("the first look at the certificates", async () => agent.status().certificates?.checkedAt ?? undefined);
  return { n, agent, pki, pkiDir, httpsPort };
}

/** One fresh handshake (no session given, so none resumed): the certificate the client got. */
function handshake(port: number, ca: string, servername = SERVER_NAME): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, servername, ca }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint;
      socket.destroy();
      resolve(fingerprint);
    });
    socket.setTimeout(5000, () => socket.destroy(new Error("handshake timed out")));
    socket.on("error", reject);
  });
}

/** Loops of handshakes, `parallel` at a time, until stopped: what each saw, and every failure. */
function tlsLoad(port: number, ca: string, parallel = 4) {
  const seen: Array<{ at: number; fingerprint: string }> = [];
  const failures: string[] = [];
  let stopped = false;
  const loops = Array.from({ length: parallel }, async () => {
    while (!stopped) {
      try {
        seen.push({ at: performance.now(), fingerprint: await handshake(port, ca) });
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
  });
  return {
    seen,
    failures,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Replaces a file as an editor or `cp` onto a mount would not leave it half-written. */
function replaceFile(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

async function metric(agent: Agent, line: string): Promise<string | undefined> {
  const page = await (await fetch(`${agent.url}/metrics`)).text();
  return page.split("\n").find((l) => l.startsWith(line));
}

describe("certificate rotation without a reload", () => {
  it("serves a renewed file within 10 s under TLS load, no handshake failing, no reload", async () => {
    const s = await start((_, pki) => pki.serverPem);
    const old = await handshake(s.httpsPort, s.pki.ca);
    const reloads = await s.n.reloads();
    const load = tlsLoad(s.httpsPort, s.pki.ca);
    await waitFor("handshakes under way", async () => (load.seen.length >= 20 ? true : undefined));

    const renewed = issueServerCert(s.pkiDir, SERVER_NAME);
    const renewedAt = performance.now();
    replaceFile(s.pki.serverPem, renewed.cert + renewed.key);
    const first = await waitFor(
      "the renewed certificate served",
      async () => load.seen.find((h) => h.at > renewedAt && h.fingerprint === renewed.fingerprint),
      10_000,
    );
    const servedAfter = load.seen.length;
    await waitFor("more handshakes after the swap", async () =>
      load.seen.length >= servedAfter + 50 ? true : undefined,
    );
    await load.stop();

    expect(load.failures).toEqual([]);
    expect(first.at - renewedAt).toBeLessThan(10_000);
    // Once swapped, every handshake gets the renewed certificate; before, the old one.
    const fingerprints = new Set(load.seen.map((h) => h.fingerprint));
    expect(fingerprints).toEqual(new Set([old, renewed.fingerprint]));
    expect(load.seen.filter((h) => h.at > first.at + 100).every((h) => h.fingerprint === renewed.fingerprint)).toBe(
      true,
    );
    expect(await s.n.reloads()).toBe(reloads);
    expect(s.agent.status().certificates).toMatchObject({
      swapped: 1,
      lastSwap: { certificate: s.pki.serverPem },
      refused: [],
    });
    expect(await metric(s.agent, 'servicelb_certificate_updates_total{result="swapped"}')).toBe(
      'servicelb_certificate_updates_total{result="swapped"} 1',
    );
  });

  it("follows a Kubernetes Secret volume, renewed by swapping its ..data symlink", async () => {
    // A projected volume: <host>.pem and <host>.pem.key are links into ..data, itself a link to
    // the directory of the current version; the kubelet renews all files at once by re-pointing ..data.
    let certs = "";
    const version = (dir: string, name: string, cert: string, key: string) => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, `${SERVER_NAME}.pem`), cert);
      writeFileSync(join(dir, name, `${SERVER_NAME}.pem.key`), key);
    };
    const s = await start((pkiDir) => {
      certs = join(pkiDir, "certs");
      mkdirSync(certs);
      const first = issueServerCert(pkiDir, SERVER_NAME);
      version(certs, "..2026_12_01_00_00_00.1", first.cert, first.key);
      symlinkSync("..2026_12_01_00_00_00.1", join(certs, "..data"));
      for (const f of [`${SERVER_NAME}.pem`, `${SERVER_NAME}.pem.key`]) symlinkSync(join("..data", f), join(certs, f));
      return certs;
    });
    const reloads = await s.n.reloads();
    const renewed = issueServerCert(s.pkiDir, SERVER_NAME);
    version(certs, "..2026_12_02_00_00_00.2", renewed.cert, renewed.key);
    symlinkSync("..2026_12_02_00_00_00.2", join(certs, "..data_tmp"));
    renameSync(join(certs, "..data_tmp"), join(certs, "..data"));
    rmSync(join(certs, "..2026_12_01_00_00_00.1"), { recursive: true });

    await waitFor(
      "the renewed certificate served",
      async () => ((await handshake(s.httpsPort, s.pki.ca)) === renewed.fingerprint ? true : undefined),
      10_000,
    );
    expect(await s.n.reloads()).toBe(reloads);
    expect(s.agent.status().certificates?.lastSwap?.certificate).toBe(join(certs, `${SERVER_NAME}.pem`));
  });

  it("swaps a certificate a crt-list names, leaving the others as they are", async () => {
    let other = "";
    const s = await start((pkiDir, pki) => {
      other = join(pkiDir, "other.pem");
      const cert = issueServerCert(pkiDir, "other.test");
      writeFileSync(other, cert.cert + cert.key);
      const list = join(pkiDir, "certs.list");
      writeFileSync(list, `${pki.serverPem} ${SERVER_NAME}\n${other} other.test\n`);
      return `crt-list:${list}`;
    });
    const lb = await handshake(s.httpsPort, s.pki.ca);
    const reloads = await s.n.reloads();
    const renewed = issueServerCert(s.pkiDir, "other.test");
    replaceFile(other, renewed.cert + renewed.key);
    await waitFor(
      "the renewed other.test served",
      async () => ((await handshake(s.httpsPort, s.pki.ca, "other.test")) === renewed.fingerprint ? true : undefined),
      10_000,
    );
    expect(await handshake(s.httpsPort, s.pki.ca)).toBe(lb);
    expect(await s.n.reloads()).toBe(reloads);
    expect(s.agent.status().certificates).toMatchObject({ swapped: 1, lastSwap: { certificate: other } });
  });

  it("keeps serving the old certificate when the file is bad, and says why", async () => {
    const s = await start((_, pki) => pki.serverPem);
    const old = await handshake(s.httpsPort, s.pki.ca);
    const reloads = await s.n.reloads();
    const other = issueServerCert(s.pkiDir, SERVER_NAME);
    const expired = issueServerCert(s.pkiDir, SERVER_NAME, { expired: true });
    const bad: Array<[string, string, RegExp]> = [
      ["a key of another certificate", other.cert + expired.key, /not the key of the certificate/],
      ["an expired certificate", expired.cert + expired.key, /expired on 2020-01-02/],
      ["garbage", "not a certificate\n", /no certificate/],
    ];
    for (const [what, text, reason] of bad) {
      replaceFile(s.pki.serverPem, text);
      const refused = await waitFor(`${what} refused`, async () =>
        s.agent.status().certificates?.refused.find((r) => reason.test(r.reason)),
      );
      expect(refused.certificate).toBe(s.pki.serverPem);
      expect(await handshake(s.httpsPort, s.pki.ca)).toBe(old);
      expect(await metric(s.agent, "servicelb_certificate_refused{")).toBe(
        `servicelb_certificate_refused{certificate="${s.pki.serverPem}"} 1`,
      );
    }
    expect(await metric(s.agent, 'servicelb_certificate_updates_total{result="refused"}')).toBe(
      'servicelb_certificate_updates_total{result="refused"} 3',
    );

    // A good file again: served, and nothing reported any more.
    replaceFile(s.pki.serverPem, other.cert + other.key);
    await waitFor("the good file served", async () =>
      (await handshake(s.httpsPort, s.pki.ca)) === other.fingerprint ? true : undefined,
    );
    await waitFor("the refusal cleared", async () =>
      s.agent.status().certificates?.refused.length === 0 ? true : undefined,
    );
    expect(await metric(s.agent, "servicelb_certificate_refused{")).toBeUndefined();
    expect(await s.n.reloads()).toBe(reloads);
  });
});
