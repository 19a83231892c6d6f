import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  GatewayCertificates,
  NODE_CERTIFICATE_DIR,
  scanGatewayCertificates,
} from "../../../shared/agent/gateway-certificates.js";
import { nodeStatusSchema } from "../../../shared/agent/status-report.js";
import { issueServerCert, makePki } from "../../support/tls.js";

let pki: string;
let dir: string;
const dirs: string[] = [];
/** A fresh directory, removed after the file's tests. */
const freshDir = () => {
  dir = mkdtempSync(join(tmpdir(), "gw-certs-"));
  dirs.push(dir);
};
let site: ReturnType<typeof issueServerCert>;

beforeAll(() => {
  pki = mkdtempSync(join(tmpdir(), "gw-pki-"));
  makePki(pki);
  site = issueServerCert(pki, "site.example.com");
});
afterAll(() => {
  rmSync(pki, { recursive: true, force: true });
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function put(path: string, text: string): void {
  mkdirSync(join(dir, path, ".."), { recursive: true });
  writeFileSync(join(dir, path), text);
}

describe("the Gateway certificates a node holds", () => {
  it("are the <namespace>/<name>.pem files that load, by name; the others are refused with why", async () => {
    freshDir();
    put("default/site.pem", site.cert + site.key);
    put("certs/split.pem", site.cert);
    put("certs/split.pem.key", site.key);
    put("certs/no-key.pem", site.cert);
    put("certs/garbage.pem", "not a certificate\n");
    put(
      "certs/expired.pem",
      (({ cert, key }) => cert + key)(issueServerCert(pki, "old.example.com", { expired: true })),
    );
    put("certs/README.txt", "not a .pem");
    put("certs/Bad_Name.pem", site.cert + site.key);
    put("Not-A-Namespace/site.pem", site.cert + site.key);
    const scan = await scanGatewayCertificates(dir);
    expect(scan.held).toEqual(["certs/split", "default/site"]);
    expect(Object.fromEntries(scan.refused.map((r) => [r.ref, r.reason.replaceAll(dir, "<dir>")]))).toEqual({
      "certs/expired": expect.stringMatching(/^<dir>\/certs\/expired\.pem: the certificate expired on /),
      "certs/garbage": "<dir>/certs/garbage.pem: no certificate (no BEGIN CERTIFICATE block)",
      "certs/no-key": "<dir>/certs/no-key.pem: no private key, in the file or in <dir>/certs/no-key.pem.key beside it",
    });
    // What the report carries: names only, never a key.
    expect(JSON.stringify(scan)).not.toContain("PRIVATE KEY");
  });

  it("are read through a Secret volume's links, its hidden entries skipped", async () => {
    freshDir();
    // As the kubelet lays out a Secret volume with items: ..data links to a timestamped directory.
    put("..2026_01_01_00_00_00.1/default/site.pem", site.cert);
    put("..2026_01_01_00_00_00.1/default/site.pem.key", site.key);
    symlinkSync("..2026_01_01_00_00_00.1", join(dir, "..data"));
    symlinkSync("..data/default", join(dir, "default"));
    expect(await scanGatewayCertificates(dir)).toEqual({ held: ["default/site"], refused: [] });
  });

  it("are none in a directory that does not exist", async () => {
    expect(await scanGatewayCertificates(join(tmpdir(), "servicelb-no-such-dir"))).toEqual({ held: [], refused: [] });
  });

  it("say when they changed, so that the report goes out soon", async () => {
    freshDir();
    const held = new GatewayCertificates(dir, pino({ level: "silent" }));
    expect(await held.check()).toBe(false);
    expect(held.held()).toEqual([]);
    put("default/site.pem", site.cert + site.key);
    expect(await held.check()).toBe(true);
    expect(held.held()).toEqual(["default/site"]);
    expect(await held.check()).toBe(false);
    rmSync(join(dir, "default/site.pem"));
    expect(await held.check()).toBe(true);
    expect(held.held()).toEqual([]);
  });

  it("parse a file again only when it changed, and judge its expiry at every look", async () => {
    freshDir();
    put("default/site.pem", site.cert + site.key);
    let reads = 0;
    const counting = {
      ...NODE_CERTIFICATE_DIR,
      read: (path: string) => {
        reads++;
        return NODE_CERTIFICATE_DIR.read(path);
      },
    };
    let now = new Date();
    const held = new GatewayCertificates(dir, pino({ level: "silent" }), counting, () => now);
    await held.check();
    const first = reads;
    await held.check();
    expect(reads).toBe(first);
    expect(held.held()).toEqual(["default/site"]);
    now = new Date(Date.now() + 3 * 86_400_000);
    expect(await held.check()).toBe(true);
    expect(held.held()).toEqual([]);
    expect(reads).toBe(first);
    now = new Date();
    put("default/site.pem", `${site.cert}${site.key}\n`);
    await held.check();
    expect(reads).toBeGreaterThan(first);
    expect(held.held()).toEqual(["default/site"]);
  });
});

describe("the report's gatewayCertificates", () => {
  it("default to null in reports of agents from before", () => {
    const report = {
      node: "n1",
      applied: null,
      lastError: null,
      backoff: null,
      haproxy: { running: true },
      reportIntervalSeconds: 60,
      reportedAt: "2026-01-01T00:00:00.000Z",
      agent: "servicelb/0.1.0",
    };
    expect(nodeStatusSchema.parse(report).gatewayCertificates).toBeNull();
    expect(nodeStatusSchema.parse({ ...report, gatewayCertificates: ["default/site"] }).gatewayCertificates).toEqual([
      "default/site",
    ]);
  });
});
