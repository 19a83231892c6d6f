import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { OptionsError } from "../../shared/core/settings/settings.js";
import { createObjectStore, type HistoryEntry, type ObjectStore } from "../../shared/adapters/store.js";
import { resolveConfigRef, runDiff, runHistory } from "../../shared/app/history-command.js";
import { runReconcileOnce } from "../../shared/app/reconcile-command.js";
import { KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { service, slice } from "../support/fixtures.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

// The operator commands as the CLI calls them: commander's camelCase flags, output on stdout.

let s3: TestS3;
let store: ObjectStore;
let flags: Record<string, unknown>;
let stdout: string;

beforeAll(async () => {
  s3 = await startS3();
  vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
  vi.stubEnv("LOG_LEVEL", "silent");
  flags = { store: `s3://${s3.bucket}/history/`, storeEndpoint: s3.endpoint, storePathStyle: true };
  store = createObjectStore({
    url: flags.store as string,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
  });
  await store.publish({
    config: "global\n  maxconn 100\nbackend a\n  server s1 10.0.0.1:80\n",
    revision: "120",
    generator: "servicelb/test",
  });
  await store.publish({
    config: "global\n  maxconn 100\nbackend a\n  server s1 10.0.0.2:80\n",
    revision: "130",
    generator: "servicelb/test",
  });
});

afterAll(async () => {
  vi.unstubAllEnvs();
  store.close();
  await s3.stop();
});

function captureStdout(): void {
  stdout = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("servicelb history", () => {
  it("lists the published configs newest first, as a table or as JSON", async () => {
    captureStdout();
    expect(await runHistory(flags)).toBe(0);
    const rows = stdout.trimEnd().split("\n");
    expect(rows[0]).toMatch(/^EPOCH\s+REVISION\s+SEQ\s+DIGEST\s+PRODUCER\s+SETTINGS\s+BYTES\s+PUBLISHED\s+KEY$/);
    expect(rows.slice(1).map((r) => r.split(/\s+/).slice(0, 5))).toEqual([
      ["0", "130", "0", expect.stringMatching(/^[0-9a-f]{16}$/), "servicelb/test"],
      ["0", "120", "0", expect.stringMatching(/^[0-9a-f]{16}$/), "servicelb/test"],
    ]);

    captureStdout();
    expect(await runHistory({ ...flags, format: "json", limit: "1" })).toBe(0);
    const entries = JSON.parse(stdout) as HistoryEntry[];
    expect(entries.map((e) => e.revision)).toEqual(["130"]);
    expect(entries[0]!.key).toMatch(/^history\/configs\/000000-0+130-0000000000-[0-9a-f]{16}\.cfg$/);
    expect(entries[0]).toMatchObject({
      producer: "servicelb/test",
      settingsDigest: null,
      problem: null,
      pinned: false,
    });
  });

  it("names a missing --store setting", async () => {
    await expect(runHistory({})).rejects.toThrow(/--store \/ SERVICELB_STORE is required/);
  });
});

describe("servicelb diff", () => {
  it("prints a unified diff between two configs named by revision or latest~N", async () => {
    captureStdout();
    expect(await runDiff("120", "latest", flags)).toBe(0);
    const [older, newer] = (await store.history()).reverse();
    expect(stdout).toBe(
      `--- ${older!.key}\n+++ ${newer!.key}\n@@ -1,4 +1,4 @@\n global\n   maxconn 100\n backend a\n-  server s1 10.0.0.1:80\n+  server s1 10.0.0.2:80\n`,
    );

    captureStdout();
    expect(await runDiff("latest~1", "latest~1", flags)).toBe(0);
    expect(stdout).toBe("");
  });
});

describe("resolveConfigRef", () => {
  const entry = (key: string, revision: string): HistoryEntry => ({
    key,
    epoch: 0,
    revision,
    seq: 0,
    sha256Prefix: key.slice(-20, -4),
    size: 1,
    lastModified: new Date(0),
  });
  const entries = [
    entry("p/configs/00000000000000000130-bbbbbbbbbbbbbbbb.cfg", "130"),
    entry("p/configs/00000000000000000120-aaaaaaaaaaaaaaaa.cfg", "120"),
    entry("p/configs/00000000000000000120-0aaaaaaaaaaaaaaa.cfg", "120"),
  ];

  it("accepts a key, a file name, a revision and latest~N", () => {
    expect(resolveConfigRef(entries[1]!.key, entries)).toBe(entries[1]!.key);
    expect(resolveConfigRef("00000000000000000130-bbbbbbbbbbbbbbbb.cfg", entries)).toBe(entries[0]!.key);
    expect(resolveConfigRef("130", entries)).toBe(entries[0]!.key);
    expect(resolveConfigRef("latest", entries)).toBe(entries[0]!.key);
    expect(resolveConfigRef("latest~2", entries)).toBe(entries[2]!.key);
  });

  it("refuses ambiguous and unknown names", () => {
    expect(() => resolveConfigRef("120", entries)).toThrow(OptionsError);
    expect(() => resolveConfigRef("120", entries)).toThrow(/names 2 configs/);
    expect(() => resolveConfigRef("99", entries)).toThrow(/no such config/);
    expect(() => resolveConfigRef("latest~3", entries)).toThrow(/holds 3 trusted config/);
  });
});

describe("servicelb reconcile --once", () => {
  it("renders with the settings recorded in the store unless flags say otherwise, and says what differs; diff --settings shows it", async () => {
    const api = await new KubeApiEmulator().start();
    try {
      api.upsert("Service", service("web", [{ port: 80 }]) as unknown as KubeObject);
      api.upsert("EndpointSlice", slice("web", [{ port: 80 }], ["10.1.0.1"]) as unknown as KubeObject);
      const once = { ...flags, store: `s3://${s3.bucket}/recorded/`, kubeconfig: await api.writeKubeconfig() };
      let stderr = "";
      vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
        stderr += String(chunk);
        return true;
      });

      // The deployed function's settings, as its first publish records them.
      captureStdout();
      expect(await runReconcileOnce({ ...once, httpPort: "8080", bindAddress: "127.0.0.1" })).toBe(0);
      const deployed = JSON.parse(stdout) as { key: string; status: string };
      expect(deployed.status).toBe("published");
      expect(stderr).toContain("the store records no settings");

      // A shell with no render flags renders what the function would: nothing to publish.
      captureStdout();
      stderr = "";
      expect(await runReconcileOnce(once)).toBe(0);
      expect(JSON.parse(stdout)).toMatchObject({
        status: "unchanged",
        key: deployed.key,
        settings: { recordedWith: deployed.key, differs: [] },
      });
      expect(stderr).toMatch(/rendering with the settings recorded with \S+ \(settings [0-9a-f]{16}\)\n/);

      // A flag wins, and is named.
      captureStdout();
      stderr = "";
      expect(await runReconcileOnce({ ...once, balanceAlgorithm: "leastconn" })).toBe(0);
      const changed = JSON.parse(stdout) as { status: string; key: string; settings: { differs: unknown[] } };
      expect(changed).toMatchObject({
        status: "published",
        settings: { differs: [{ setting: "balanceAlgorithm", from: "roundrobin", to: "leastconn" }] },
      });
      expect(stderr).toContain("except: balanceAlgorithm roundrobin → leastconn");
      const recorded = createObjectStore({
        url: once.store,
        endpoint: s3.endpoint,
        forcePathStyle: true,
        credentials: S3RVER_CREDENTIALS,
      });
      expect((await recorded.get(changed.key).finally(() => recorded.close())).config).toContain("bind 127.0.0.1:8080");

      captureStdout();
      expect(await runDiff("latest~1", "latest", { ...once, settings: true })).toBe(0);
      expect(stdout).toBe(`--- ${deployed.key}\n+++ ${changed.key}\nbalanceAlgorithm: roundrobin → leastconn\n`);
    } finally {
      await api.stop();
    }
  });

  it("runs one pass against the live cluster and prints the result", async () => {
    const api = await new KubeApiEmulator().start();
    try {
      api.upsert("Service", service("web", [{ port: 80 }]) as unknown as KubeObject);
      api.upsert("EndpointSlice", slice("web", [{ port: 80 }], ["10.1.0.1"]) as unknown as KubeObject);
      captureStdout();
      const once = { ...flags, store: `s3://${s3.bucket}/once/`, kubeconfig: await api.writeKubeconfig() };
      expect(await runReconcileOnce(once)).toBe(0);
      expect(JSON.parse(stdout)).toMatchObject({
        status: "published",
        revision: api.resourceVersion,
        counts: { services: 1, servers: 1 },
      });
    } finally {
      await api.stop();
    }
  });
});
