import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Counter, Gauge, Registry } from "prom-client";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CertificatePayloadTooLarge } from "../../../shared/adapters/haproxy/certificates.js";
import { createLogger } from "../../../shared/adapters/log.js";
import {
  type CertificateFiles,
  type CertificateRuntime,
  CertificateWatch,
  loadsCertificates,
} from "../../../shared/agent/certificate-watch.js";
import { type IssuedCert, issueServerCert, makePki } from "../../support/tls.js";

// The change detection of the certificate watcher, with the node's files and HAProxy's runtime
// API in memory: what is looked at, when HAProxy is given a file, and what is reported.

const SOCKET = "/run/haproxy/admin.sock";
const PEM = "/etc/haproxy/certs/lb.pem";
const CONFIG = {
  text: `global\n    stats socket ${SOCKET} mode 600 level admin\nfrontend https\n    bind 0.0.0.0:443 ssl crt ${PEM}\n`,
};

let dir: string;
let first: IssuedCert;
let renewed: IssuedCert;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "servicelb-watch-"));
  makePki(dir);
  first = issueServerCert(dir);
  renewed = issueServerCert(dir);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hex = (c: IssuedCert) => new X509Certificate(c.cert).fingerprint.replaceAll(":", "");

/** Files by path, each with a version that stands for its inode, size and times. */
class FakeFiles implements CertificateFiles {
  readonly files = new Map<string, { text: string; version: number }>();
  reads = 0;
  readPaths = new Set<string>();
  private versions = 0;
  write(path: string, text: string): void {
    this.files.set(path, { text, version: ++this.versions });
  }
  /** A new signature, the same contents (touch, or a Secret volume re-projected unchanged). */
  touch(path: string): void {
    this.files.get(path)!.version = ++this.versions;
  }
  async signature(path: string) {
    const f = this.files.get(path);
    return f ? String(f.version) : null;
  }
  async read(path: string) {
    this.reads++;
    this.readPaths.add(path);
    return this.files.get(path)?.text ?? null;
  }
}

/** HAProxy's certificates: what it serves under each name, and what it was told. */
class FakeRuntime implements CertificateRuntime {
  served = new Map<string, string>();
  replaced: Array<{ name: string; pem: readonly string[] }> = [];
  fail: Error | null = null;
  listed = 0;
  async names() {
    this.listed++;
    return [...this.served.keys()];
  }
  async fingerprint(_socket: string, name: string) {
    return this.served.get(name)!;
  }
  async replace(_socket: string, name: string, pem: readonly string[]) {
    if (this.fail) throw this.fail;
    this.replaced.push({ name, pem });
    this.served.set(name, new X509Certificate(pem.join("\n")).fingerprint.replaceAll(":", ""));
  }
}

let files: FakeFiles;
let runtime: FakeRuntime;
let registry: Registry;
let watch: CertificateWatch;
let running: { text: string } | null;

beforeEach(() => {
  files = new FakeFiles();
  runtime = new FakeRuntime();
  registry = new Registry();
  running = CONFIG;
  watch = new CertificateWatch({
    running: () => running,
    runtime,
    files,
    log: createLogger("test", "silent"),
    metrics: {
      certificateUpdates: new Counter({ name: "u", help: "u", labelNames: ["result"], registers: [registry] }),
      certificateRefused: new Gauge({ name: "r", help: "r", labelNames: ["certificate"], registers: [registry] }),
    },
  });
  files.write(PEM, first.cert + first.key);
  runtime.served.set(PEM, hex(first));
});

async function counts(): Promise<Record<string, number>> {
  const m = await registry.getSingleMetric("u")!.get();
  return Object.fromEntries(m.values.map((v) => [String(v.labels.result), v.value]));
}
async function refusedSeries(): Promise<string[]> {
  return (await registry.getSingleMetric("r")!.get()).values.map((v) => String(v.labels.certificate));
}

describe("CertificateWatch", () => {
  it("gives HAProxy nothing while the files hold what it serves", async () => {
    await watch.check();
    await watch.check();
    expect(runtime.replaced).toEqual([]);
    expect(watch.status()).toMatchObject({ swapped: 0, refused: [] });
    expect(watch.status().checkedAt).not.toBeNull();
  });

  it("does nothing before HAProxy runs a config", async () => {
    running = null;
    await watch.check();
    expect(files.reads).toBe(0);
    expect(watch.status().checkedAt).toBeNull();
  });

  it("asks HAProxy nothing when its config loads no certificate", async () => {
    running = { text: `global\n    stats socket ${SOCKET} mode 600 level admin\nfrontend http\n    bind :80\n` };
    await watch.check();
    expect(runtime.listed).toBe(0);
    expect(files.reads).toBe(0);
  });

  it("swaps a renewed file in once, its key beside it or in it", async () => {
    await watch.check();
    files.write(PEM, renewed.cert);
    files.write(`${PEM}.key`, renewed.key);
    await watch.check();
    await watch.check();
    expect(runtime.replaced.map((r) => r.name)).toEqual([PEM]);
    expect(`${runtime.replaced[0]!.pem.join("\n")}\n`).toBe(renewed.cert + renewed.key);
    expect(watch.status()).toMatchObject({
      swapped: 1,
      lastSwap: { certificate: PEM, serial: new X509Certificate(renewed.cert).serialNumber },
    });
    expect(await counts()).toEqual({ swapped: 1, refused: 0, failed: 0 });
  });

  it("reads a file again only when its signature changes, and checks it only when its contents do", async () => {
    await watch.check();
    const reads = files.reads;
    await watch.check();
    expect(files.reads).toBe(reads);
    files.touch(PEM);
    await watch.check();
    expect(files.reads).toBe(reads + 1);
    expect(runtime.replaced).toEqual([]);
  });

  it("compares every file with what HAProxy serves again after a reload onto a new config", async () => {
    await watch.check();
    // A swap that reached the worker a reload replaced: the new one read the file before it was renewed.
    files.write(PEM, renewed.cert + renewed.key);
    await watch.check();
    runtime.served.set(PEM, hex(first));
    await watch.check();
    expect(runtime.replaced).toHaveLength(1);
    running = { text: `${CONFIG.text}# reloaded\n` };
    await watch.check();
    expect(runtime.replaced).toHaveLength(2);
    expect(runtime.served.get(PEM)).toBe(hex(renewed));
  });

  it("swaps a file renewed before its first look when HAProxy serves another certificate", async () => {
    files.write(PEM, renewed.cert + renewed.key);
    await watch.check();
    expect(runtime.replaced.map((r) => r.name)).toEqual([PEM]);
  });

  it("refuses a bad file once, keeps what HAProxy serves, and clears the report when the file is good", async () => {
    await watch.check();
    files.write(PEM, renewed.cert + first.key);
    await watch.check();
    files.touch(PEM);
    await watch.check();
    expect(runtime.replaced).toEqual([]);
    expect(runtime.served.get(PEM)).toBe(hex(first));
    expect(watch.status().refused).toEqual([
      { certificate: PEM, reason: expect.stringMatching(/not the key of the certificate/), since: expect.any(String) },
    ]);
    expect(await refusedSeries()).toEqual([PEM]);
    expect(await counts()).toEqual({ swapped: 0, refused: 1, failed: 0 });

    files.write(PEM, renewed.cert + renewed.key);
    await watch.check();
    expect(runtime.served.get(PEM)).toBe(hex(renewed));
    expect(watch.status().refused).toEqual([]);
    expect(await refusedSeries()).toEqual([]);
  });

  it("reports a file that is gone, and clears it when the file is back as HAProxy serves it", async () => {
    await watch.check();
    files.files.delete(PEM);
    await watch.check();
    expect(watch.status().refused[0]?.reason).toMatch(/the file is gone; HAProxy serves what it loaded/);
    files.write(PEM, first.cert + first.key);
    await watch.check();
    expect(watch.status().refused).toEqual([]);
    expect(runtime.replaced).toEqual([]);
  });

  it("tries a swap the runtime API failed again at the next check, counting each failure", async () => {
    await watch.check();
    files.write(PEM, renewed.cert + renewed.key);
    runtime.fail = new Error("connection refused");
    await watch.check();
    expect(await counts()).toMatchObject({ failed: 1, swapped: 0 });
    runtime.fail = null;
    await watch.check();
    expect(runtime.served.get(PEM)).toBe(hex(renewed));
    expect(await counts()).toMatchObject({ failed: 1, swapped: 1 });
  });

  it("leaves contents too large for the runtime API to the next reload, reported", async () => {
    await watch.check();
    files.write(PEM, renewed.cert + renewed.key);
    runtime.fail = new CertificatePayloadTooLarge(PEM, 20_000);
    await watch.check();
    await watch.check();
    expect(watch.status().refused[0]?.reason).toMatch(/20000 bytes, more than .*; served from the next reload/);
    expect(await counts()).toMatchObject({ refused: 1, failed: 0 });
  });

  it("forgets certificates HAProxy no longer loads, and does not watch relative paths", async () => {
    runtime.served.set("certs/relative.pem", hex(first));
    files.write(PEM, "garbage");
    await watch.check();
    expect(watch.status().refused.map((r) => r.certificate)).toEqual([PEM]);
    expect(files.readPaths.has("certs/relative.pem")).toBe(false);
    runtime.served.delete(PEM);
    running = { text: `${CONFIG.text}# another config\n` };
    await watch.check();
    expect(watch.status().refused).toEqual([]);
    expect(await refusedSeries()).toEqual([]);
  });
});

describe("loadsCertificates", () => {
  it("is true for a bind with ssl and crt or crt-list, whatever the options between", () => {
    expect(loadsCertificates("frontend f\n    bind 0.0.0.0:443 ssl crt /etc/haproxy/certs/\n")).toBe(true);
    expect(loadsCertificates("    bind :443 ssl crt-list /etc/haproxy/certs.list ca-file /ca verify required\n")).toBe(
      true,
    );
    expect(loadsCertificates("    bind :443 ssl alpn h2 crt /c.pem\n")).toBe(true);
    expect(loadsCertificates("    bind :80\n    server s1 10.0.0.1:443 ssl verify none\n")).toBe(false);
    expect(loadsCertificates("    # bind :443 ssl crt /c.pem\n")).toBe(false);
  });
});
