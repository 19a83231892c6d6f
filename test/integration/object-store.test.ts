import { createHash } from "node:crypto";
import { ListObjectsV2Command, PutObjectCommand, HeadObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createObjectStore,
  StoreError,
  type ObjectStore,
  type ObjectStoreOptions,
} from "../../shared/adapters/object-store.js";
import { parseStoreUrl } from "../../shared/core/store-url.js";
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

async function keysUnder(prefix: string): Promise<string[]> {
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

  it.each(["bucket/prefix", "http://bucket/prefix", "s3:/bucket", "s3://", "s3:///prefix", "s3://Bucket/x", "s3://ab", "s3://-bucket"])(
    "rejects %j",
    (url) => {
      expect(() => parseStoreUrl(url)).toThrow(/s3:\/\/bucket|bucket name/);
    },
  );
});

describe("publish, latest, get", () => {
  it("round-trips a config with its sha256 and metadata", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const config = cfg(1);
    const sha = sha256(config);

    expect(await store.latest()).toBeNull();
    const result = await store.publish({ config, revision: "42", generator: GENERATOR });

    const key = `${prefix}configs/00000000000000000042-${sha.slice(0, 16)}.cfg`;
    expect(result).toEqual({ status: "published", key, sha256: sha, newest: { key, sha256: sha, revision: "42" } });
    expect(await store.latest()).toEqual({ key, sha256: sha, revision: "42", generator: GENERATOR });
    expect(await store.get(key)).toEqual({ key, config, sha256: sha, revision: "42" });

    const head = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
    expect(head.ContentType).toMatch(/^text\/plain/);
    expect(head.Metadata).toEqual({ sha256: sha, revision: "42", generator: GENERATOR });
  });

  it("writes nothing when the config equals the newest one", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const first = await store.publish({ config: cfg(1), revision: "10", generator: GENERATOR });

    for (const revision of ["10", "11", "9"]) {
      const again = await store.publish({ config: cfg(1), revision, generator: "other/1.0" });
      expect(again.status).toBe("unchanged");
      expect(again.key).toBe(first.key);
      expect(again.newest).toEqual(first.newest);
    }
    expect(await keysUnder(prefix)).toEqual([first.key]);
  });

  it("refuses a config from an older snapshot", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const newer = await store.publish({ config: cfg(2), revision: "200", generator: GENERATOR });
    const older = await store.publish({ config: cfg(1), revision: "100", generator: GENERATOR });

    expect(older.status).toBe("stale");
    expect(older.newest).toEqual(newer.newest);
    expect((await store.latest())?.key).toBe(newer.key);
    expect(await keysUnder(prefix)).toEqual([newer.key]);
  });

  it("keeps the newer snapshot newest when an older publisher's write lands last", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const newer = await store.publish({ config: cfg(2), revision: "200", generator: GENERATOR });
    // The older publisher listed before the newer one wrote, so it did not see it and wrote too.
    const olderConfig = cfg(1);
    const olderSha = sha256(olderConfig);
    const olderKey = `${prefix}configs/00000000000000000100-${olderSha.slice(0, 16)}.cfg`;
    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: olderKey,
        Body: olderConfig,
        Metadata: { sha256: olderSha, revision: "100", generator: GENERATOR },
      }),
    );

    expect((await store.latest())?.key).toBe(newer.key);
    expect((await store.history()).map((entry) => entry.revision)).toEqual(["200", "100"]);
  });

  it("keeps publishing past a newest object that has no metadata (a hand upload)", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const handKey = `${prefix}configs/00000000000000000011-${"0".repeat(16)}.cfg`;
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: handKey, Body: "hand-made" }));

    expect(await store.publish({ config: cfg(1), revision: "10", generator: GENERATOR })).toMatchObject({ status: "stale", newest: { key: handKey } });
    const next = await store.publish({ config: cfg(2), revision: "12", generator: GENERATOR });
    expect(next.status).toBe("published");
    expect((await store.latest())?.key).toBe(next.key);
  });

  it("converges on the highest revision when publishers race", async () => {
    const prefix = newPrefix();
    const revisions = [305, 101, 999, 42, 500, 998];
    const results = await Promise.all(
      revisions.map((revision) =>
        openStore(prefix).publish({ config: cfg(revision), revision: String(revision), generator: GENERATOR }),
      ),
    );

    expect(results.every((result) => result.status !== "unchanged")).toBe(true);
    expect(await openStore(prefix).latest()).toMatchObject({ revision: "999", sha256: sha256(cfg(999)) });
  });

  it("writes both configs of one revision and lets the greater sha win", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const [low, high] = [cfg(1), cfg(2)].sort((a, b) => (sha256(a) < sha256(b) ? -1 : 1)) as [string, string];

    const first = await store.publish({ config: high, revision: "7", generator: GENERATOR });
    const second = await store.publish({ config: low, revision: "7", generator: "other/2.0" });

    expect(second.status).toBe("published");
    expect(second.newest).toEqual(first.newest);
    expect((await store.latest())?.key).toBe(first.key);
    expect((await keysUnder(prefix)).sort()).toEqual([first.key, second.key].sort());
  });

  it("orders revisions numerically across digit-length boundaries", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const revisions = ["99", "100", "9", "1000", "0999", "9223372036854775807"];
    for (const revision of revisions.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1))) {
      expect((await store.publish({ config: cfg(Number(revision.slice(0, 6))), revision, generator: GENERATOR })).status).toBe(
        "published",
      );
    }

    expect((await store.latest())?.revision).toBe("9223372036854775807");
    const history = await store.history();
    expect(history.map((entry) => entry.revision)).toEqual(["9223372036854775807", "1000", "999", "100", "99", "9"]);
    expect(history.map((entry) => entry.key)).toEqual([...history.map((entry) => entry.key)].sort().reverse());
    expect(history.find((entry) => entry.revision === "999")?.key).toContain("/configs/00000000000000000999-");

    const stale = await store.publish({ config: cfg(5), revision: "99999", generator: GENERATOR });
    expect(stale.status).toBe("stale");
  });

  it.each(["", "12a", "-1", " 1", "1.5", "0x10", "123456789012345678901"])("rejects revision %j", async (revision) => {
    const store = openStore();
    await expect(store.publish({ config: cfg(1), revision, generator: GENERATOR })).rejects.toThrow(/revision/);
  });

  it("rejects a generator that cannot travel as a header", async () => {
    await expect(openStore().publish({ config: cfg(1), revision: "1", generator: "gén\n" })).rejects.toThrow(/generator/);
  });
});

describe("integrity", () => {
  it("detects a body that no longer matches its sha256", async () => {
    const store = openStore();
    const { key, sha256: original } = await store.publish({ config: cfg(1), revision: "5", generator: GENERATOR });
    const tampered = cfg(666);
    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: key,
        Body: tampered,
        Metadata: { sha256: original, revision: "5", generator: GENERATOR },
      }),
    );

    const error = await store.get(key).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).transient).toBe(false);
    expect((error as StoreError).message).toContain(original);
    expect((error as StoreError).message).toContain(sha256(tampered));
  });

  it("detects metadata that does not match the key", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const config = cfg(1);
    const key = `${prefix}configs/00000000000000000005-0123456789abcdef.cfg`;
    await s3.client.send(
      new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: config, Metadata: { sha256: sha256(config) } }),
    );

    await expect(store.get(key)).rejects.toThrow(/0123456789abcdef/);
    await expect(store.latest()).rejects.toThrow(StoreError);
  });

  it("rejects keys that are not config keys of this store", async () => {
    const store = openStore();
    await expect(store.get("elsewhere/configs/00000000000000000005-0123456789abcdef.cfg")).rejects.toThrow(/not a config key/);
    await expect(store.get("nope")).rejects.toThrow(/not a config key/);
  });
});

describe("history and retention", () => {
  async function publishRevisions(store: ObjectStore, revisions: number[]): Promise<string[]> {
    const keys: string[] = [];
    for (const revision of revisions) {
      keys.push((await store.publish({ config: cfg(revision), revision: String(revision), generator: GENERATOR })).key);
    }
    return keys;
  }

  it("lists newest first, with a limit", async () => {
    const store = openStore();
    const keys = await publishRevisions(store, [1, 2, 3, 4]);

    const all = await store.history();
    expect(all.map((entry) => entry.key)).toEqual([...keys].reverse());
    expect(all[0]).toEqual({
      key: keys[3],
      revision: "4",
      sha256Prefix: sha256(cfg(4)).slice(0, 16),
      size: Buffer.byteLength(cfg(4)),
      lastModified: expect.any(Date),
    });
    expect((await store.history({ limit: 2 })).map((entry) => entry.revision)).toEqual(["4", "3"]);
    expect(await openStore().history()).toEqual([]);
  });

  it("prunes all but the newest N and never the newest", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const keys = await publishRevisions(store, [1, 2, 3, 4, 5]);

    expect(await store.prune({ keep: 2 })).toEqual(keys.slice(0, 3));
    expect(await keysUnder(prefix)).toEqual(keys.slice(3));
    expect(await store.prune({ keep: 1 })).toEqual([keys[3]]);
    expect(await store.prune({ keep: 1 })).toEqual([]);
    expect((await store.latest())?.key).toBe(keys[4]);
    await expect(store.prune({ keep: 0 })).rejects.toThrow(/never deleted/);
  });

  it("prunes after each publish down to `retain`", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix, { retain: 3 });
    const keys = await publishRevisions(store, [10, 20, 30, 40, 50]);

    expect(await keysUnder(prefix)).toEqual(keys.slice(2));
    expect(() => openStore(newPrefix(), { retain: 0 })).toThrow(/retain/);
  });
});

describe("agent statuses", () => {
  it("stores one status per node and lists them", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    expect(await store.listStatuses()).toEqual([]);

    await store.putStatus("node-a", { node: "node-a", key: "k1", ok: true });
    await store.putStatus("node-b.example.com", { node: "node-b.example.com", key: "k1", ok: false });
    await store.putStatus("node-a", { node: "node-a", key: "k2", ok: true });

    const statuses = (await store.listStatuses()) as Array<{ node: string; key: string }>;
    expect(statuses.sort((a, b) => a.node.localeCompare(b.node))).toEqual([
      { node: "node-a", key: "k2", ok: true },
      { node: "node-b.example.com", key: "k1", ok: false },
    ]);
    expect(await keysUnder(`${prefix}status/`)).toEqual([`${prefix}status/node-a.json`, `${prefix}status/node-b.example.com.json`]);
    // Statuses are not configs.
    expect(await store.latest()).toBeNull();
  });

  it.each(["", "Node-A", "-node", "node-", "a/b", "a..b", "x".repeat(254)])("rejects node name %j", async (node) => {
    await expect(openStore().putStatus(node, {})).rejects.toThrow(/DNS-1123/);
  });
});

describe("store unavailable", () => {
  async function expectTransientFailure(store: ObjectStore, endpoint: string, run: () => Promise<unknown>): Promise<void> {
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
    const endpoint = await deadEndpoint();
    const store = openStore(newPrefix(), { endpoint });
    await expectTransientFailure(store, endpoint, () => store.latest());
    await expectTransientFailure(store, endpoint, () =>
      store.publish({ config: cfg(1), revision: "1", generator: GENERATOR }),
    );
  });

  it("fails transiently once a running server stops", async () => {
    const other = await startS3(s3.bucket);
    const store = openStore(newPrefix(), { endpoint: other.endpoint });
    await store.publish({ config: cfg(1), revision: "1", generator: GENERATOR });
    await other.stop();
    await expectTransientFailure(store, other.endpoint, () => store.latest());
  });

  it("times out a server that never answers", async () => {
    const hung = await hangingEndpoint();
    try {
      const store = openStore(newPrefix(), { endpoint: hung.endpoint, timeoutMs: 300 });
      await expectTransientFailure(store, hung.endpoint, () => store.latest());
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
