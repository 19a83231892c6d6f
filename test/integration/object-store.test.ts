import { createHash } from "node:crypto";
import { DeleteObjectCommand, HeadObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createObjectStore,
  StoreError,
  type ObjectStore,
  type ObjectStoreOptions,
} from "../../shared/adapters/store.js";
import { parseStoreUrl } from "../../shared/core/publish/store-url.js";
import { configDigest } from "../../shared/core/publish/config-digest.js";
import { dripProxy } from "../support/drip.js";
import { deadEndpoint, hangingEndpoint, S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

const GENERATOR = "servicelb/test";

let s3: TestS3;
let stores: ObjectStore[] = [];
let prefixCounter = 0;

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3.stop();
});
afterEach(() => {
  for (const store of stores) store.close();
  stores = [];
});

/** Each test gets its own prefix in the shared bucket. */
function newPrefix(): string {
  prefixCounter += 1;
  return `t${prefixCounter}/lb/`;
}

function openStore(prefix = newPrefix(), options: Partial<ObjectStoreOptions> = {}): ObjectStore {
  const store = createObjectStore({
    url: `s3://${s3.bucket}/${prefix}`,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
    ...options,
  });
  stores.push(store);
  return store;
}

async function _keysUnder(prefix: string): Promise<string[]> {
  const page = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  return (page.Contents ?? []).map((object) => object.Key!);
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function cfg(n: number): string {
  return `global\n  maxconn ${n}\n`;
}

describe("parseStoreUrl", () => {
  it("normalizes the prefix", () => {
    expect(parseStoreUrl("s3://bucket")).toEqual({ bucket: "bucket", prefix: "" });
    expect(parseStoreUrl("s3://bucket/")).toEqual({ bucket: "bucket", prefix: "" });
    expect(parseStoreUrl("s3://my.bucket-1/some/prefix")).toEqual({ bucket: "my.bucket-1", prefix: "some/prefix/" });
    expect(parseStoreUrl("s3://bucket//some//prefix/")).toEqual({ bucket: "bucket", prefix: "some/prefix/" });
  });

  it.each([
    "bucket/prefix",
    "http://bucket/prefix",
    "s3:/bucket",
    "s3://",
    "s3:///prefix",
    "s3://Bucket/x",
    "s3://ab",
    "s3://-bucket",
  ])("rejects %j", (url) => {
    expect(() => parseStoreUrl(url)).toThrow(/s3:\/\/bucket|bucket name/);
  });
});

describe("publish, latest, get", () => {
  it("round-trips a config with its sha256 and metadata", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const config = cfg(1);
    const sha = sha256(config);

    expect(await store.latest()).toBeNull();
    const result = await store.publish({ config, revision: "42", generator: GENERATOR });

    const key = `${prefix}configs/000000-00000000000000000042-0000000000-${sha.slice(0, 16)}.cfg`;
    expect(result).toEqual({
      status: "published",
      key,
      sha256: sha,
      epoch: 0,
      newest: { key, sha256: sha, revision: "42" },
      skipped: [],
    });
    expect(await store.latest()).toEqual({
      key,
      sha256: sha,
      revision: "42",
      generator: GENERATOR,
      epoch: 0,
      seq: 0,
      settingsDigest: null,
      layoutDigest: null,
    });
    expect(await store.get(key)).toEqual({ key, config, sha256: sha, revision: "42" });

    const head = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
    expect(head.ContentType).toMatch(/^text\/plain/);
    expect(head.Metadata).toEqual({
      sha256: sha,
      revision: "42",
      generator: GENERATOR,
      epoch: "0",
      seq: "0",
      bytes: String(config.length),
    });
  });

  it("a warm publisher's unchanged pass reads the configs listing alone; views only when a marker may be due", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      const prefix = newPrefix();
      const store = openStore(prefix, { endpoint: proxy.endpoint });
      let probes = 0;
      const liveRevision = async () => {
        probes += 1;
        return "100";
      };
      const listed = () =>
        proxy.seen
          .filter((r) => r.method === "GET" && r.path.includes("list-type=2"))
          .map((r) => new URL(r.path, proxy.endpoint).searchParams.get("prefix")?.slice(prefix.length));
      const pass = async (config: string, revision: string) => {
        proxy.seen.length = 0;
        const result = await store.publish({ config, revision, generator: GENERATOR, liveRevision });
        return { status: result.status, view: result.view !== undefined, listed: listed() };
      };

      expect(await pass(cfg(1), "10")).toEqual({ status: "published", view: false, listed: ["configs/", "views/"] });
      expect(probes).toBe(1);
      expect(await pass(cfg(1), "10")).toEqual({ status: "unchanged", view: false, listed: ["configs/"] });
      expect(await pass(cfg(1), "11")).toEqual({ status: "unchanged", view: true, listed: ["configs/", "views/"] });
      expect(probes).toBe(1);
      // Someone else's bytes are newest now: the pass lists everything and asks the live cluster before writing.
      await openStore(prefix).publish({ config: cfg(2), revision: "11", generator: GENERATOR });
      expect(await pass(cfg(1), "12")).toEqual({ status: "published", view: false, listed: ["configs/", "views/"] });
      expect(probes).toBe(2);
    } finally {
      await proxy.stop();
    }
  });

  it("a warm publish lists the configs from the newest one it knows on, with the same newest as a full listing", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      const prefix = newPrefix();
      const store = openStore(prefix, { endpoint: proxy.endpoint });
      const startAfter = () =>
        proxy.seen
          .filter((r) => r.method === "GET" && r.path.includes("list-type=2") && r.path.includes("configs%2F"))
          .map((r) => new URL(r.path, proxy.endpoint).searchParams.get("start-after")?.slice(prefix.length) ?? null);
      const pass = async (config: string, revision: string) => {
        proxy.seen.length = 0;
        const result = await store.publish({ config, revision, generator: GENERATOR });
        return { status: result.status, key: result.key, startAfter: startAfter() };
      };
      const first = await pass(cfg(1), "10");
      expect(first).toMatchObject({ status: "published", startAfter: [null] });
      // From just before the key it left: that key is in the answer, so it is known to still be there.
      const second = await pass(cfg(2), "11");
      expect(second).toMatchObject({ status: "published", startAfter: [first.key.slice(prefix.length, -1)] });
      // A view no config has: seq 0 (the seq counts decisions from one view).
      expect(second.key).toMatch(/-00000000000000000011-0000000000-[0-9a-f]{16}\.cfg$/);

      // Another instance publishes past it: the listing from the known key finds that one.
      const other = await openStore(prefix).publish({ config: cfg(3), revision: "12", generator: GENERATOR });
      const third = await pass(cfg(4), "13");
      expect(third).toMatchObject({ status: "published", startAfter: [second.key.slice(prefix.length, -1)] });
      expect(third.key).toMatch(/-00000000000000000013-0000000000-[0-9a-f]{16}\.cfg$/);
      expect(other.key < third.key).toBe(true);

      // The key it knows is gone behind its back: the whole history is listed, and the newest
      // that is left decides (these bytes are not in the store any more, so they are written).
      await s3.client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: third.key }));
      const fourth = await pass(cfg(4), "13");
      expect(fourth).toMatchObject({ status: "published", startAfter: [third.key.slice(prefix.length, -1), null] });
      expect(fourth.key).toBe(third.key);
      expect(await pass(cfg(4), "13")).toMatchObject({ status: "unchanged", key: fourth.key });
    } finally {
      await proxy.stop();
    }
  });
});

describe("config bodies sent unsigned", () => {
  const settings = { options: {}, template: { source: "built-in", sha256: "0".repeat(64) } };
  const puts = (seen: Array<{ method: string; path: string; payload?: string }>, under: string) =>
    seen.filter((r) => r.method === "PUT" && r.path.includes(under)).map((r) => r.payload);

  it("sends a config's body as UNSIGNED-PAYLOAD, its metadata and every other object signed", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      const store = openStore(newPrefix(), { endpoint: proxy.endpoint });
      const config = cfg(1);
      const published = await store.publish({ config, revision: "10", generator: GENERATOR, settings });
      expect(puts(proxy.seen, "/configs/")).toEqual(["UNSIGNED-PAYLOAD"]);
      // The settings record is JSON nobody verifies by a digest of its own: its body is signed.
      expect(puts(proxy.seen, "/settings/")).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/)]);
      // The body arrived whole: it verifies by the digest its signed metadata names.
      const got = await store.get(published.key);
      expect(got.config).toBe(config);
      expect(got.sha256).toBe(configDigest("sha256", config));
    } finally {
      await proxy.stop();
    }
  });

  it("signs config bodies from the first refusal on, for a store that does not take unsigned ones", async () => {
    const proxy = await dripProxy(s3.endpoint);
    proxy.mode = (req) =>
      req.method === "PUT" && req.headers["x-amz-content-sha256"] === "UNSIGNED-PAYLOAD" ? "refuse" : "pass";
    try {
      const store = openStore(newPrefix(), { endpoint: proxy.endpoint });
      const first = await store.publish({ config: cfg(1), revision: "10", generator: GENERATOR });
      expect(first.status).toBe("published");
      const signed = expect.stringMatching(/^[0-9a-f]{64}$/);
      expect(puts(proxy.seen, "/configs/")).toEqual(["UNSIGNED-PAYLOAD", signed]);
      proxy.seen.length = 0;
      expect((await store.publish({ config: cfg(2), revision: "11", generator: GENERATOR })).status).toBe("published");
      expect(puts(proxy.seen, "/configs/")).toEqual([signed]);
      expect((await store.get((await store.latest())!.key)).config).toBe(cfg(2));
    } finally {
      await proxy.stop();
    }
  });

  it("keeps sending bodies unsigned when the signed PUT is refused too (a policy that denies the write)", async () => {
    const proxy = await dripProxy(s3.endpoint);
    proxy.refuseStatus = 403;
    proxy.mode = (req) => (req.method === "PUT" && req.url?.includes("/configs/") ? "refuse" : "pass");
    try {
      const store = openStore(newPrefix(), { endpoint: proxy.endpoint });
      await expect(store.publish({ config: cfg(1), revision: "10", generator: GENERATOR })).rejects.toThrow(/HTTP 403/);
      expect(puts(proxy.seen, "/configs/")).toEqual(["UNSIGNED-PAYLOAD", expect.stringMatching(/^[0-9a-f]{64}$/)]);
      proxy.seen.length = 0;
      proxy.mode = () => "pass";
      expect((await store.publish({ config: cfg(1), revision: "10", generator: GENERATOR })).status).toBe("published");
      expect(puts(proxy.seen, "/configs/")).toEqual(["UNSIGNED-PAYLOAD"]);
    } finally {
      await proxy.stop();
    }
  });

  it("does not sign again what fails for another reason: the store's error stands", async () => {
    const proxy = await dripProxy(s3.endpoint);
    proxy.refuseStatus = 500;
    proxy.mode = (req) => (req.method === "PUT" ? "refuse" : "pass");
    try {
      const store = openStore(newPrefix(), { endpoint: proxy.endpoint });
      await expect(store.publish({ config: cfg(1), revision: "10", generator: GENERATOR })).rejects.toThrow(/HTTP 500/);
      const sent = puts(proxy.seen, "/configs/");
      expect(sent.length).toBeGreaterThan(0);
      expect(sent.every((p) => p === "UNSIGNED-PAYLOAD")).toBe(true);
    } finally {
      await proxy.stop();
    }
  });
});

describe("configs published by tree1 digests", () => {
  const backends = (n: number) =>
    `global\n  maxconn 10\n${Array.from({ length: n }, (_, i) => `backend b${i}\n  server s 10.0.0.${i}:80\n`).join("")}`;

  it("a tree1 publisher that found its bytes under a sha256 newest reads the configs listing alone next time", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      const prefix = newPrefix();
      const store = openStore(prefix, { endpoint: proxy.endpoint });
      const listed = () =>
        proxy.seen
          .filter((r) => r.method === "GET" && r.path.includes("list-type=2"))
          .map((r) => new URL(r.path, proxy.endpoint).searchParams.get("prefix")?.slice(prefix.length));
      const first = await store.publish({ config: backends(3), revision: "5", generator: GENERATOR });
      const pass = async (config: string) => {
        proxy.seen.length = 0;
        const result = await store.publish({ config, digest: "tree1", revision: "5", generator: GENERATOR });
        return { status: result.status, key: result.key, sha256: result.sha256, listed: listed() };
      };
      const unchanged = { status: "unchanged", key: first.key, sha256: first.sha256 };
      expect(await pass(backends(3))).toEqual({ ...unchanged, listed: ["configs/", "views/"] });
      expect(await pass(backends(3))).toEqual({ ...unchanged, listed: ["configs/"] });
      // The memo names these bytes only: others are a change.
      expect(await pass(backends(4))).toMatchObject({
        status: "published",
        sha256: configDigest("tree1", backends(4)),
      });
    } finally {
      await proxy.stop();
    }
  });
});

describe("store unavailable", () => {
  async function expectTransientFailure(endpoint: string, run: () => Promise<unknown>): Promise<void> {
    const started = performance.now();
    const error = await run().catch((e: unknown) => e);
    const elapsed = performance.now() - started;

    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).transient).toBe(true);
    expect((error as StoreError).message).toContain(endpoint);
    expect((error as StoreError).message).toContain(s3.bucket);
    expect(elapsed).toBeLessThan(3_000);
  }

  it("fails fast and transiently when nothing listens", async () => {
    const endpoint = deadEndpoint();
    const store = openStore(newPrefix(), { endpoint });
    await expectTransientFailure(endpoint, () => store.latest());
    await expectTransientFailure(endpoint, () =>
      store.publish({ config: cfg(1), revision: "1", generator: GENERATOR }),
    );
  });

  it("fails transiently once a running server stops", async () => {
    const other = await startS3(s3.bucket);
    const store = openStore(newPrefix(), { endpoint: other.endpoint });
    await store.publish({ config: cfg(1), revision: "1", generator: GENERATOR });
    await other.stop();
    await expectTransientFailure(other.endpoint, () => store.latest());
  });

  it("times out a server that never answers", async () => {
    const hung = await hangingEndpoint();
    try {
      const store = openStore(newPrefix(), { endpoint: hung.endpoint, timeoutMs: 300 });
      await expectTransientFailure(hung.endpoint, () => store.latest());
    } finally {
      await hung.stop();
    }
  });

  it("reports a missing bucket as permanent", async () => {
    const store = createObjectStore({
      url: "s3://no-such-bucket/x",
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
    });
    stores.push(store);
    const error = await store.latest().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).transient).toBe(false);
    expect((error as StoreError).message).toMatch(/no-such-bucket.*NoSuchBucket/);
  });
});

describe("the nodes' reports, read by signed GETs of their own (s3-lean-get.ts)", () => {
  const report = (node: string) => ({ node, applied: null, reportedAt: "2026-12-02T00:00:00.000Z" });

  it("reads every record under a prefix that needs escaping, signed as s3rver checks it", async () => {
    const store = openStore("t-lean/a b!(c)*'/");
    for (const node of ["node-a", "node-b.example.com", "node-c"]) await store.putStatus(node, report(node));
    const read = await store.readStatuses();
    expect(read.listed).toBe(3);
    expect(read.unread).toEqual([]);
    expect((read.reports as Array<{ node: string }>).map((r) => r.node)).toEqual([
      "node-a",
      "node-b.example.com",
      "node-c",
    ]);
    expect(await store.listStatuses()).toEqual(read.reports);
  });

  it("reads the others when one record keeps failing, and that one again after them; listStatuses fails with it", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      proxy.refuseStatus = 503;
      proxy.mode = (req) => (req.method === "GET" && req.url?.includes("/status/node-b.json") ? "refuse" : "pass");
      const prefix = newPrefix();
      const direct = openStore(prefix);
      for (const node of ["node-a", "node-b", "node-c"]) await direct.putStatus(node, report(node));
      const store = openStore(prefix, { endpoint: proxy.endpoint });
      const read = await store.readStatuses();
      expect(read.listed).toBe(3);
      expect((read.reports as Array<{ node: string }>).map((r) => r.node)).toEqual(["node-a", "node-c"]);
      expect(read.unread).toHaveLength(1);
      expect(read.unread[0]!.key).toBe(`${prefix}status/node-b.json`);
      expect(read.unread[0]!.error.transient).toBe(true);
      expect(read.unread[0]!.error.message).toContain(
        `s3://${s3.bucket}/${prefix}status/node-b.json at ${proxy.endpoint}`,
      );
      // Two attempts, as the client makes, and two more after the other records.
      expect(proxy.seen.filter((r) => r.path.includes("/status/node-b.json"))).toHaveLength(4);
      await expect(store.listStatuses()).rejects.toBeInstanceOf(StoreError);
    } finally {
      await proxy.stop();
    }
  });

  it("holds a record to the deadline and the size cap, and a refusal goes once to the client, not retried", async () => {
    const proxy = await dripProxy(s3.endpoint);
    try {
      const prefix = newPrefix();
      const direct = openStore(prefix);
      await direct.putStatus("node-a", { ...report("node-a"), padding: "x".repeat(4000) });
      proxy.dripMs = 100;
      proxy.mode = (req) => (req.method === "GET" && req.url?.endsWith("/status/node-a.json") ? "drip" : "pass");
      const slow = openStore(prefix, { endpoint: proxy.endpoint, deadlineMs: 300 });
      const started = performance.now();
      const late = (await slow.readStatuses()).unread[0]?.error;
      expect(late?.message).toMatch(/no complete answer within 300 ms/);
      expect(late?.transient).toBe(true);
      expect(performance.now() - started).toBeLessThan(3000);

      proxy.mode = (req) => (req.method === "GET" && req.url?.endsWith("/status/node-a.json") ? "chunked" : "pass");
      const capped = openStore(prefix, { endpoint: proxy.endpoint, maxObjectBytes: 1000 });
      const large = (await capped.readStatuses()).unread[0]?.error;
      expect(large?.message).toMatch(/passed the cap of 1000 bytes/);
      expect(large?.transient).toBe(false);

      proxy.refuseStatus = 403;
      proxy.mode = (req) => (req.method === "GET" && req.url?.includes("/status/node-a.json") ? "refuse" : "pass");
      const before = proxy.seen.length;
      const denied = (await openStore(prefix, { endpoint: proxy.endpoint }).readStatuses()).unread[0]?.error;
      // The lean GET's 403, then the client's own try (s3-lean-get.ts), which the proxy refuses too.
      expect(denied?.transient).toBe(false);
      expect(denied?.message).toContain("status/node-a.json");
      expect(proxy.seen.slice(before).filter((r) => r.path.includes("/status/"))).toHaveLength(2);
    } finally {
      await proxy.stop();
    }
  });
});
