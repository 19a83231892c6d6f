import { createHash } from "node:crypto";
import { DeleteObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand } from "@aws-sdk/client-s3";
import { afterEach, describe, expect, it } from "vitest";
import { createMemoryBlobStore, type MemoryBlobStore } from "../../../shared/adapters/memory-blob-store.js";
import { createStore, StoreError, type ObjectStore } from "../../../shared/adapters/store.js";
import { type BackendLayout, layoutDigest } from "../../../shared/core/model/layout-record.js";
import { configDigest, digestHex } from "../../../shared/core/publish/config-digest.js";
import { treeDigest } from "../../../shared/core/publish/tree-digest.js";

// The publish protocol on the in-memory blob store (shared/adapters/memory-blob-store.ts): what
// configs, markers and records a publish reads and writes, and how every reader judges them. The
// S3 adapter's own behaviour (signing, timeouts, a store that goes away) is tested against s3rver
// in test/integration/object-store.test.ts.

const GENERATOR = "servicelb/test";

/** One bucket for every test; each test gets its own prefix in it. */
const objects: MemoryBlobStore["objects"] = new Map();
let stores: ObjectStore[] = [];
let prefixCounter = 0;

afterEach(() => {
  for (const store of stores) store.close();
  stores = [];
});

function newPrefix(): string {
  prefixCounter += 1;
  return `t${prefixCounter}/lb/`;
}

function openStore(prefix = newPrefix(), options: { retain?: number } = {}): ObjectStore {
  const store = createStore(createMemoryBlobStore({ bucket: "servicelb-test", prefix, objects }), options);
  stores.push(store);
  return store;
}

/**
 * Raw access to the bucket, as another writer (a hand upload, an older servicelb) would have it:
 * the few S3 commands these tests send, read off their input.
 */
const s3 = {
  bucket: "servicelb-test",
  client: {
    // biome-ignore lint/suspicious/noExplicitAny: answers are read as the S3 commands' outputs
    async send(command: unknown): Promise<any> {
      const raw = createMemoryBlobStore({ bucket: "servicelb-test", objects });
      if (command instanceof PutObjectCommand) {
        const { Key, Body, Metadata, ContentType } = command.input;
        await raw.put(Key!, Body as string, { contentType: ContentType ?? "text/plain", metadata: Metadata });
        return {};
      }
      if (command instanceof DeleteObjectCommand) {
        await raw.delete(command.input.Key!);
        return {};
      }
      if (command instanceof HeadObjectCommand) {
        const head = await raw.head(command.input.Key!);
        return { Metadata: head.metadata, ContentLength: head.size };
      }
      if (command instanceof ListObjectsV2Command)
        return { Contents: (await raw.list(command.input.Prefix ?? "")).map((e) => ({ Key: e.key, Size: e.size })) };
      throw new Error("not a command these tests send");
    },
  },
};

/** The objects under a prefix but newest.json, the hint every publish rewrites (tested on its own). */
async function keysUnder(prefix: string): Promise<string[]> {
  const page = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  return ((page.Contents ?? []) as Array<{ Key: string }>)
    .map((object) => object.Key)
    .filter((key) => key !== `${prefix}newest.json`);
}

/** A body swapped under a config's key, its metadata kept (a store's bit rot, or a hand edit). */
async function replaceBody(_s3: typeof s3, key: string, body: string): Promise<void> {
  const o = objects.get(key)!;
  objects.set(key, {
    ...o,
    body: Buffer.from(body),
    metadata: { ...o.metadata, bytes: String(Buffer.byteLength(body)) },
  });
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function cfg(n: number): string {
  return `global\n  maxconn ${n}\n`;
}

describe("publish, latest, get", () => {
  it("writes no config when the config equals the newest one; a newer view leaves only a marker", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const first = await store.publish({ config: cfg(1), revision: "10", generator: GENERATOR });

    for (const revision of ["10", "11", "9"]) {
      const again = await store.publish({ config: cfg(1), revision, generator: "other/1.0" });
      expect(again.status).toBe("unchanged");
      expect(again.key).toBe(first.key);
      expect(again.newest).toEqual(first.newest);
      expect(again.view).toBe(revision === "11" ? `${prefix}views/000000-00000000000000000011` : undefined);
    }
    expect(await keysUnder(prefix)).toEqual([first.key, `${prefix}views/000000-00000000000000000011`]);
  });

  it("names the newest config in newest.json after each publish, and leaves it when a publish writes no config", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    expect(await store.getNewestHint()).toBeNull();
    const first = await store.publish({ config: cfg(1), revision: "100", generator: GENERATOR });
    expect(await store.getNewestHint()).toEqual({ key: first.key, sha256: first.sha256 });
    const second = await store.publish({ config: cfg(2), revision: "200", generator: GENERATOR });
    expect(await store.getNewestHint()).toEqual({ key: second.key, sha256: second.sha256 });
    expect((await store.publish({ config: cfg(1), revision: "150", generator: GENERATOR })).status).toBe("stale");
    expect((await store.publish({ config: cfg(2), revision: "210", generator: GENERATOR })).status).toBe("unchanged");
    expect(await store.getNewestHint()).toEqual({ key: second.key, sha256: second.sha256 });
    // Not a hint: no hint, never an error.
    objects.set(`${prefix}newest.json`, { ...objects.get(`${prefix}newest.json`)!, body: Buffer.from("{") });
    expect(await store.getNewestHint()).toBeNull();
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

  it("writes nothing under expectedNewest once another config has become the newest", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const mine = await store.publish({ config: cfg(1), revision: "100", generator: GENERATOR });
    const over = await store.publish({
      config: cfg(2),
      revision: "110",
      generator: GENERATOR,
      expectedNewest: mine.key,
    });
    expect(over.status).toBe("published");
    // Another instance publishes; a head start that last saw `over` newest must not write over it.
    const theirs = await openStore(prefix).publish({ config: cfg(3), revision: "120", generator: GENERATOR });
    const late = await store.publish({
      config: cfg(4),
      revision: "130",
      generator: GENERATOR,
      expectedNewest: over.key,
    });
    expect(late.status).toBe("stale");
    expect(late.newest.key).toBe(theirs.key);
    expect((await store.latest())?.key).toBe(theirs.key);
    expect(await keysUnder(prefix)).toEqual([mine.key, over.key, theirs.key]);
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

  it("skips and reports a newest object that does not verify (a hand upload, a far-future key) and keeps publishing", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const handKey = `${prefix}configs/00000000000000000011-${"0".repeat(16)}.cfg`;
    const farFuture = `${prefix}configs/99999999999999999999-0000000000000000.cfg`;
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: handKey, Body: "hand-made" }));
    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: farFuture,
        Body: "garbage",
        Metadata: { sha256: "1".repeat(64), revision: "99999999999999999999" },
      }),
    );

    const first = await store.publish({ config: cfg(1), revision: "10", generator: GENERATOR });
    expect(first).toMatchObject({
      status: "published",
      skipped: [
        { key: farFuture, reason: expect.stringMatching(/does not match the key's digest prefix/) },
        { key: handKey, reason: expect.stringMatching(/no sha256 or digest metadata/) },
      ],
    });
    const next = await store.publish({ config: cfg(2), revision: "12", generator: GENERATOR });
    expect(next.status).toBe("published");
    expect((await store.latest())?.key).toBe(next.key);
    // Only keys above the newest verified config are in its way.
    expect((await store.newest()).skipped.map((s) => s.key)).toEqual([farFuture]);
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

  it("lets a later publish of one revision win whatever its sha (settings changed, servicelb upgraded)", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const [low, high] = [cfg(1), cfg(2)].sort((a, b) => (sha256(a) < sha256(b) ? -1 : 1)) as [string, string];

    const keys: string[] = [];
    for (const config of [high, low, high, low]) {
      const result = await store.publish({ config, revision: "7", generator: GENERATOR });
      expect(result.status).toBe("published");
      expect(result.newest.key).toBe(result.key);
      expect((await store.latest())?.sha256).toBe(sha256(config));
      keys.push(result.key);
    }
    expect(keys.map((k) => k.split("-")[2])).toEqual(["0000000000", "0000000001", "0000000002", "0000000003"]);
  });

  it("orders revisions numerically across digit-length boundaries", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const revisions = ["99", "100", "9", "1000", "0999", "9223372036854775807"];
    for (const revision of revisions.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1))) {
      expect(
        (await store.publish({ config: cfg(Number(revision.slice(0, 6))), revision, generator: GENERATOR })).status,
      ).toBe("published");
    }

    expect((await store.latest())?.revision).toBe("9223372036854775807");
    const history = await store.history();
    expect(history.map((entry) => entry.revision)).toEqual(["9223372036854775807", "1000", "999", "100", "99", "9"]);
    expect(history.map((entry) => entry.key)).toEqual([...history.map((entry) => entry.key)].sort().reverse());
    expect(history.find((entry) => entry.revision === "999")?.key).toContain("/configs/000000-00000000000000000999-");

    const stale = await store.publish({ config: cfg(5), revision: "99999", generator: GENERATOR });
    expect(stale.status).toBe("stale");
  });

  it.each(["", "12a", "-1", " 1", "1.5", "0x10", "123456789012345678901"])("rejects revision %j", async (revision) => {
    const store = openStore();
    await expect(store.publish({ config: cfg(1), revision, generator: GENERATOR })).rejects.toThrow(/revision/);
  });

  it("rejects a generator that cannot travel as a header", async () => {
    await expect(openStore().publish({ config: cfg(1), revision: "1", generator: "gén\n" })).rejects.toThrow(
      /generator/,
    );
  });
});

describe("decision order across upgrades, overlaps and restores", () => {
  /** A config as the first key format (`<revision>-<sha>.cfg`) wrote it. */
  async function putLegacy(prefix: string, config: string, revision: number): Promise<string> {
    const sha = sha256(config);
    const key = `${prefix}configs/${String(revision).padStart(20, "0")}-${sha.slice(0, 16)}.cfg`;
    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: key,
        Body: config,
        Metadata: { sha256: sha, revision: String(revision), generator: "servicelb/0.0.9" },
      }),
    );
    return key;
  }

  it("lists the whole history when the newest config it knows has a key of the first format", async () => {
    const prefix = newPrefix();
    const legacyKey = await putLegacy(prefix, cfg(1), 100);
    const store = openStore(prefix);
    expect(await store.publish({ config: cfg(1), revision: "100", generator: GENERATOR })).toMatchObject({
      status: "unchanged",
      key: legacyKey,
    });
    // A newer epoch-0 key of this format sorts before every first-format key as a string.
    const newer = await openStore(prefix).publish({ config: cfg(2), revision: "150", generator: GENERATOR });
    expect(newer.key < legacyKey).toBe(true);
    expect(await store.publish({ config: cfg(2), revision: "150", generator: GENERATOR })).toMatchObject({
      status: "unchanged",
      key: newer.key,
    });
  });

  it("reads keys of the first format as epoch 0, seq 0: an upgrade publishes past them, at the same revision too", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const old100 = await putLegacy(prefix, cfg(1), 100);
    const old90 = await putLegacy(prefix, cfg(9), 90);
    expect(await store.latest()).toMatchObject({ key: old100, epoch: 0, seq: 0, revision: "100" });
    expect((await store.history()).map((e) => e.key)).toEqual([old100, old90]);

    expect(await store.publish({ config: cfg(5), revision: "95", generator: GENERATOR })).toMatchObject({
      status: "stale",
    });
    const upgraded = await store.publish({ config: cfg(2), revision: "100", generator: GENERATOR });
    expect(upgraded).toMatchObject({ status: "published", epoch: 0, newest: { key: upgraded.key } });
    expect(upgraded.key).toMatch(/configs\/000000-00000000000000000100-0000000001-/);
    expect((await store.latest())?.key).toBe(upgraded.key);
    expect((await store.history()).map((e) => e.key)).toEqual([upgraded.key, old100, old90]);
  });

  it("an older pass finishing after a newer one that found nothing to change is stale: the newer view was recorded", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const published = await store.publish({ config: cfg(1), revision: "100", generator: GENERATOR });
    // The newer pass (revision 120) renders the same bytes: no config, a view marker.
    expect(await store.publish({ config: cfg(1), revision: "120", generator: GENERATOR })).toMatchObject({
      status: "unchanged",
      view: `${prefix}views/000000-00000000000000000120`,
    });
    // The older pass (revision 110, another config) finishes last; the live cluster is past 120.
    const older = await store.publish({
      config: cfg(2),
      revision: "110",
      generator: GENERATOR,
      liveRevision: async () => "125",
    });
    expect(older.status).toBe("stale");
    expect((await store.latest())?.key).toBe(published.key);
    expect(await keysUnder(`${prefix}configs/`)).toEqual([published.key]);
  });

  it("tells a cluster whose revisions went back from a stale pass, and publishes a fresh list into the next epoch", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const before = await store.publish({ config: cfg(1), revision: "500", generator: GENERATOR });

    // Restored: the live cluster is at 40, below the store's mark.
    const seen = await store.publish({
      config: cfg(2),
      revision: "35",
      generator: GENERATOR,
      liveRevision: async () => "40",
    });
    expect(seen).toMatchObject({
      status: "regressed",
      regression: { mark: { epoch: 0, revision: "500" }, live: "40", snapshot: "35" },
    });
    expect((await store.latest())?.key).toBe(before.key);
    const restored = await store.publish({ config: cfg(2), revision: "41", generator: GENERATOR, restore: true });
    expect(restored).toMatchObject({ status: "published", epoch: 1, newEpoch: true });
    expect(restored.key).toMatch(/configs\/000001-00000000000000000041-0000000000-/);
    expect((await store.latest())?.key).toBe(restored.key);

    // A pass that listed the old cluster (revision 480) before the restore finishes now: its
    // snapshot is ahead of the live cluster, so it does not publish into the new epoch.
    const late = await store.publish({
      config: cfg(3),
      revision: "480",
      generator: GENERATOR,
      liveRevision: async () => "45",
    });
    expect(late.status).toBe("regressed");
    // The pass's fresh list is the restored cluster, at or past the new epoch's mark: published normally.
    expect(await store.publish({ config: cfg(4), revision: "46", generator: GENERATOR, restore: true })).toMatchObject({
      status: "published",
      epoch: 1,
    });
  });

  it("moves no epoch by a view marker: one past the newest config's epoch, or above the live cluster, counts for nothing", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    await store.publish({ config: cfg(1), revision: "100", generator: GENERATOR });
    const forged = ["999999-99999999999999999999", "000001-99999999999999999999", "000001-00000000000000000050"];
    for (const view of [...forged, "000000-99999999999999999999"]) {
      await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `${prefix}views/${view}`, Body: "{}" }));
    }
    for (const revision of ["101", "103"])
      expect(
        await store.publish({
          config: cfg(Number(revision)),
          revision,
          generator: GENERATOR,
          liveRevision: async () => revision,
        }),
      ).toMatchObject({ status: "published", epoch: 0 });
    // With no fresh list to ask, a marker of the newest config's epoch still holds a pass back, as stale.
    expect(await store.publish({ config: cfg(4), revision: "104", generator: GENERATOR })).toMatchObject({
      status: "stale",
      epoch: 0,
    });
    // The markers that did not count stay for the operator to see; a marker written since cleans up only below it.
    await store.publish({ config: cfg(103), revision: "105", generator: GENERATOR, liveRevision: async () => "105" });
    expect((await keysUnder(`${prefix}views/`)).map((k) => k.slice(`${prefix}views/`.length)).sort()).toEqual(
      ["000000-00000000000000000105", "000000-99999999999999999999", ...forged].sort(),
    );
  });
});

describe("integrity", () => {
  it("detects a body that no longer matches its sha256", async () => {
    const store = openStore();
    const { key, sha256: original } = await store.publish({ config: cfg(1), revision: "5", generator: GENERATOR });
    const tampered = cfg(666);
    await replaceBody(s3, key, tampered);

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
    expect(await store.latest()).toBeNull();
    expect((await store.newest()).skipped).toEqual([
      { key, reason: expect.stringMatching(/does not match the key's digest prefix 0123456789abcdef/) },
    ]);
  });

  it("rejects keys that are not config keys of this store", async () => {
    const store = openStore();
    await expect(store.get("elsewhere/configs/00000000000000000005-0123456789abcdef.cfg")).rejects.toThrow(
      /not a config key/,
    );
    await expect(store.get("nope")).rejects.toThrow(/not a config key/);
  });
});

describe("configs published by tree1 digests", () => {
  const backends = (n: number) =>
    `global\n  maxconn 10\n${Array.from({ length: n }, (_, i) => `backend b${i}\n  server s 10.0.0.${i}:80\n`).join("")}`;

  it("names the key by the tree digest, keeps it under `digest`, and verifies the body by it", async () => {
    const store = openStore();
    const text = backends(3);
    const published = await store.publish({ config: text, digest: "tree1", revision: "5", generator: GENERATOR });
    expect(published).toMatchObject({ status: "published", sha256: configDigest("tree1", text) });
    expect(published.key).toContain(`-${digestHex(published.sha256).slice(0, 16)}.cfg`);
    const { Metadata } = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: published.key }));
    // An agent that knows only sha256 finds none and skips the key, rather than read one it cannot match.
    expect(Metadata).toMatchObject({ digest: published.sha256 });
    expect(Metadata?.sha256).toBeUndefined();
    expect(await store.get(published.key)).toMatchObject({ config: text, sha256: published.sha256 });
    expect((await store.latest())?.sha256).toBe(published.sha256);
  });

  it("detects a tampered body, and metadata that does not match the key", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const { key, sha256: digest } = await store.publish({
      config: backends(3),
      digest: "tree1",
      revision: "5",
      generator: GENERATOR,
    });
    const tampered = backends(3).replace("10.0.0.1:", "10.6.6.6:");
    await replaceBody(s3, key, tampered);
    await expect(store.get(key)).rejects.toThrow(
      `the body's tree1 digest is ${treeDigest(tampered)} but the metadata says ${digestHex(digest)}`,
    );

    const forged = `${prefix}configs/000000-00000000000000000009-0000000001-0123456789abcdef.cfg`;
    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: forged,
        Body: tampered,
        Metadata: { digest: `tree1:${treeDigest(tampered)}`, revision: "9", epoch: "0", seq: "1" },
      }),
    );
    expect((await store.newest()).skipped).toEqual([
      { key: forged, reason: expect.stringMatching(/does not match the key's digest prefix 0123456789abcdef/) },
    ]);
  });

  it("refuses a digest under the other kind's name, and a body that is not UTF-8", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const text = backends(2);
    const tree = configDigest("tree1", text);
    const put = async (seq: number, body: string | Buffer, metadata: Record<string, string>) => {
      const hex = digestHex(metadata.digest ?? metadata.sha256!);
      const key = `${prefix}configs/000000-00000000000000000009-${String(seq).padStart(10, "0")}-${hex.slice(0, 16)}.cfg`;
      await s3.client.send(
        new PutObjectCommand({
          Bucket: s3.bucket,
          Key: key,
          Body: body,
          Metadata: { revision: "9", epoch: "0", seq: String(seq), ...metadata },
        }),
      );
      return key;
    };
    // A bare sha256 under `digest` would hide it from agents that read `sha256`; a tree1 one under `sha256` would claim to be one.
    const bare = await put(1, text, { digest: configDigest("sha256", text) });
    const misnamed = await put(2, text, { sha256: tree });
    await expect(store.get(bare)).rejects.toThrow(/does not match the key's digest prefix/);
    await expect(store.get(misnamed)).rejects.toThrow(/does not match the key's digest prefix/);
    const latin1 = Buffer.from(`${text}# caf\xe9\n`, "latin1");
    const notUtf8 = await put(3, latin1, { sha256: createHash("sha256").update(latin1).digest("hex") });
    await expect(store.get(notUtf8)).rejects.toThrow(/the body is not UTF-8 text/);
    // UTF-8 beyond ASCII (and a BOM) decodes to the very characters that were put.
    const utf8 = `\ufeff${text}# café ✓ 🚀\n`;
    const beyondAscii = await put(4, utf8, { sha256: createHash("sha256").update(utf8).digest("hex") });
    expect((await store.get(beyondAscii)).config).toBe(utf8);
    const ascii = await put(5, text, { sha256: createHash("sha256").update(text).digest("hex") });
    expect((await store.get(ascii)).config).toBe(text);
  });

  it("publishes a hashed config by its own kind only", async () => {
    const store = openStore();
    const hashed = {
      chunks: [Buffer.from(backends(1))],
      byteLength: backends(1).length,
      sha256: configDigest("sha256", backends(1)),
    };
    await expect(
      store.publish({ config: hashed, digest: "tree1", revision: "5", generator: GENERATOR }),
    ).rejects.toThrow("the config was hashed by sha256, not by tree1 as asked");
  });

  it("takes a sha256 config of the same bytes as a tree1 one's, but publishes a tree1 one again by sha256", async () => {
    const store = openStore();
    const first = await store.publish({ config: backends(3), revision: "5", generator: GENERATOR });
    // Switched to tree1: nothing changed, nothing to publish (every agent verifies sha256).
    const again = await store.publish({ config: backends(3), digest: "tree1", revision: "6", generator: GENERATOR });
    // The result names the newest key with that key's digest.
    expect(again).toMatchObject({ status: "unchanged", key: first.key, sha256: first.sha256 });
    const changed = await store.publish({ config: backends(4), digest: "tree1", revision: "7", generator: GENERATOR });
    expect(changed).toMatchObject({ status: "published", sha256: configDigest("tree1", backends(4)) });
    // Back on sha256 (an agent that verifies nothing else reported): the same bytes, by sha256, for it.
    const back = await store.publish({ config: backends(4), revision: "8", generator: GENERATOR });
    expect(back).toMatchObject({ status: "published", sha256: configDigest("sha256", backends(4)) });
    expect(
      await store.publish({ config: backends(4), digest: "tree1", revision: "9", generator: GENERATOR }),
    ).toMatchObject({
      status: "unchanged",
      key: back.key,
    });
    expect((await store.history()).map((e) => e.key)).toEqual([back.key, changed.key, first.key]);
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
      epoch: 0,
      revision: "4",
      seq: 0,
      sha256Prefix: sha256(cfg(4)).slice(0, 16),
      size: Buffer.byteLength(cfg(4)),
      lastModified: expect.any(Date),
    });
    expect((await store.history({ limit: 2 })).map((entry) => entry.revision)).toEqual(["4", "3"]);
    expect(await openStore().history()).toEqual([]);
  });

  it("judges keys by name: keys that lead the key before them too far are marked, skipped as newest, and keep no history out", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const keys = await publishRevisions(store, [1, 2, 3]);
    // Copies of the newest config whose metadata agrees with their keys: only their names give them away.
    const copy = async (epoch: string, seq: string) => {
      const key = `${prefix}configs/${epoch}-${"3".padStart(20, "0")}-${seq}-${sha256(cfg(3)).slice(0, 16)}.cfg`;
      await s3.client.send(
        new PutObjectCommand({
          Bucket: s3.bucket,
          Key: key,
          Body: cfg(3),
          Metadata: { sha256: sha256(cfg(3)), revision: "3", epoch: String(Number(epoch)), seq: String(Number(seq)) },
        }),
      );
      return key;
    };
    const farEpoch = await copy("999999", "0000000000");
    const farSeq = await copy("000000", "9999999999");
    const history = await store.history();
    expect(history.map((e) => [e.key, e.untrusted])).toEqual([
      [farEpoch, expect.stringMatching(/^epoch 999999 leads the key before it \(epoch 0\) by more than 1$/)],
      [farSeq, expect.stringMatching(/^seq 9999999999 leads the key before it \(seq 0\) by more than 16$/)],
      ...[...keys].reverse().map((k) => [k, undefined]),
    ]);
    expect(await store.newest()).toEqual({
      config: expect.objectContaining({ key: keys[2] }),
      skipped: [
        { key: farEpoch, reason: expect.stringMatching(/epoch 999999 leads/) },
        { key: farSeq, reason: expect.stringMatching(/seq 9999999999 leads/) },
      ],
    });
    // Retention counts trusted configs: the far keys, newest by order, do not push the history out.
    expect(await store.prune({ keep: 2 })).toEqual([keys[0]]);
    expect((await keysUnder(`${prefix}configs/`)).sort()).toEqual([keys[1], keys[2], farSeq, farEpoch].sort());
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

  it("says when a publish takes the store past `retain`, and prunes down to it by default", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix, { retain: 3 });
    const dues: boolean[] = [];
    const keys: string[] = [];
    for (const revision of [10, 20, 30, 40]) {
      const published = await store.publish({
        config: cfg(revision),
        revision: String(revision),
        generator: GENERATOR,
      });
      keys.push(published.key);
      dues.push(published.pruneDue === true);
    }
    expect(dues).toEqual([false, false, false, true]);
    // publish() itself deletes nothing: the caller prunes once the agents have been pinged.
    expect(await keysUnder(prefix)).toEqual(keys);
    expect(await store.prune()).toEqual([keys[0]]);
    expect(await keysUnder(prefix)).toEqual(keys.slice(1));
    expect(() => openStore(newPrefix(), { retain: 0 })).toThrow(/retain/);
  });
});

describe("backend layouts", () => {
  const layout = (holds: string | null): BackendLayout => ({
    version: 1,
    spareSlots: 4,
    named: ["default_web_80"],
    spares: [{ name: "spare_1", holds }],
    vacated: [],
  });

  it("records a config's layout beside it when it changed, reads it back, and refuses a tampered one", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    const first = await store.publish({ config: cfg(1), revision: "1", generator: GENERATOR, layout: layout(null) });
    const digest = layoutDigest(layout(null));
    expect((await store.head(first.key)).layoutDigest).toBe(digest);
    expect(await store.readLayout(digest)).toEqual(layout(null));
    // An endpoint change keeps the layout: no second record.
    await store.publish({ config: cfg(2), revision: "2", generator: GENERATOR, layout: layout(null) });
    expect((await keysUnder(`${prefix}layouts/`)).length).toBe(1);
    // A Service added into the spare: a new record.
    const third = await store.publish({
      config: cfg(3),
      revision: "3",
      generator: GENERATOR,
      layout: layout("default_api_80"),
    });
    expect((await store.latest())?.layoutDigest).toBe(layoutDigest(layout("default_api_80")));
    expect(third.status).toBe("published");
    expect((await keysUnder(`${prefix}layouts/`)).length).toBe(2);

    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: `${prefix}layouts/${digest}.json`,
        Body: JSON.stringify(layout("default_evil_80")),
      }),
    );
    await expect(store.readLayout(digest)).rejects.toThrow(/is corrupt/);
    await expect(store.readLayout("0123456789abcdef")).rejects.toThrow(/does not exist/);
  });

  it("prune keeps the newest config's layout only", async () => {
    const prefix = newPrefix();
    const store = openStore(prefix);
    await store.publish({ config: cfg(1), revision: "1", generator: GENERATOR, layout: layout(null) });
    await store.publish({ config: cfg(2), revision: "2", generator: GENERATOR, layout: layout("default_api_80") });
    expect((await keysUnder(`${prefix}layouts/`)).length).toBe(2);
    await store.prune({ keep: 2 });
    expect(await keysUnder(`${prefix}layouts/`)).toEqual([
      `${prefix}layouts/${layoutDigest(layout("default_api_80"))}.json`,
    ]);
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
    expect(await keysUnder(`${prefix}status/`)).toEqual([
      `${prefix}status/node-a.json`,
      `${prefix}status/node-b.example.com.json`,
    ]);
    // Statuses are not configs.
    expect(await store.latest()).toBeNull();
  });

  it("reads each record on its own: one that fails is unread, one that is not JSON is no report", async () => {
    const prefix = newPrefix();
    const blobs = createMemoryBlobStore({ bucket: "servicelb-test", prefix, objects });
    const store = createStore(blobs);
    stores.push(store);
    for (const node of ["node-a", "node-b", "node-c"]) await store.putStatus(node, { node });
    await s3.client.send(
      new PutObjectCommand({ Bucket: s3.bucket, Key: `${prefix}status/node-d.json`, Body: "{not json" }),
    );
    blobs.inject = (operation, key) =>
      operation === "get" && key.endsWith("/node-b.json")
        ? new StoreError("memory get failed: SlowDown", { transient: true })
        : undefined;
    const read = await store.readStatuses();
    expect(read.listed).toBe(4);
    expect(read.reports).toEqual([{ node: "node-a" }, { node: "node-c" }, "{not json"]);
    expect(read.unread.map((u) => [u.key, u.error.transient])).toEqual([[`${prefix}status/node-b.json`, true]]);
    await expect(store.listStatuses()).rejects.toThrow(/SlowDown/);
    blobs.inject = null;
    await expect(store.listStatuses()).rejects.toThrow(/node-d\.json .*is not JSON/);
  });

  it.each(["", "Node-A", "-node", "node-", "a/b", "a..b", "x".repeat(254)])("rejects node name %j", async (node) => {
    await expect(openStore().putStatus(node, {})).rejects.toThrow(/DNS-1123/);
  });
});
