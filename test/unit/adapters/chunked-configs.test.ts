import { afterEach, describe, expect, it, vi } from "vitest";
import { CHANGES, changed, renderConfig } from "../../../bench/config-changes.js";
import { createMemoryBlobStore } from "../../../shared/adapters/memory-blob-store.js";
import { createStore, StoreError } from "../../../shared/adapters/store.js";
import { chunkEnds, chunksOf } from "../../../shared/core/publish/content-chunks.js";

// Configs published in chunks (issue 30 §1), on the in-memory blob store: what a change costs an
// agent that runs the config before, and that every way a chunk can be wrong fails the pull with
// a clear StoreError and leaves nothing half-assembled behind.

const BASE = renderConfig(1000);
/** A config whose chunks are too many bytes to go inline: a reader with nothing at hand fetches each. */
const LARGE = renderConfig(2000);

function world(chunkGraceMs = 0) {
  const blobs = createMemoryBlobStore();
  const publisherBlobs = createMemoryBlobStore({ objects: blobs.objects });
  const publisher = createStore(publisherBlobs, { chunkGraceMs });
  const agentBlobs = createMemoryBlobStore({ objects: blobs.objects });
  const agent = createStore(agentBlobs);
  let revision = 100;
  const publish = async (config: string, chunked = true) =>
    publisher.publish({ config, digest: "tree1", revision: String(++revision), generator: "test", chunked });
  return { blobs, publisher, publisherBlobs, agent, agentBlobs, publish };
}

describe("content-defined chunks", () => {
  it("cut whole lines, and a change moves no cut outside the chunks around it", () => {
    const bytes = Buffer.from(BASE, "utf8");
    const ends = chunkEnds(bytes);
    expect(ends.at(-1)).toBe(bytes.length);
    for (const end of ends.slice(0, -1)) expect(bytes[end - 1]).toBe(0x0a);
    const before = new Set(chunksOf(bytes).map((c) => c.name));
    for (const change of CHANGES) {
      const after = chunksOf(Buffer.from(changed(BASE, change), "utf8"));
      expect(after.filter((c) => !before.has(c.name)).length).toBeLessThanOrEqual(3);
    }
  });
});

describe("chunked configs", () => {
  it("an agent running the config before gets each change in one GET of under 64 KiB, verified whole", async () => {
    const { agent, agentBlobs, publish } = world();
    const first = await publish(BASE);
    expect((await agent.get(first.key)).config).toBe(BASE);
    let config = BASE;
    for (const change of CHANGES) {
      const before = config;
      config = changed(config, change);
      const next = await publish(config);
      expect(next.status).toBe("published");
      agentBlobs.resetTraffic();
      const got = await agent.get(next.key, { have: before });
      expect(got).toMatchObject({ config, sha256: next.sha256 });
      expect(agentBlobs.traffic.requests.get).toBe(1);
      expect(agentBlobs.traffic.bytesOut).toBeLessThan(64 * 1024);
    }
  });

  it("an agent restarted on the config before takes its chunks from the text it runs", async () => {
    const { blobs, publish } = world();
    await publish(BASE);
    const config = changed(BASE, "endpoint moved");
    const next = await publish(config);
    const restarted = createMemoryBlobStore({ objects: blobs.objects });
    expect((await createStore(restarted).get(next.key, { have: BASE })).config).toBe(config);
    expect(restarted.traffic.requests.get).toBe(1);
  });

  it("history, head and a reader with nothing at hand read a chunked config whole", async () => {
    const { blobs, publisher, publish } = world();
    await publish(BASE, false);
    const next = await publish(changed(BASE, "Service added"));
    expect(await publisher.head(next.key)).toMatchObject({ chunked: true, sha256: next.sha256 });
    const cold = createStore(createMemoryBlobStore({ objects: blobs.objects }));
    expect((await cold.get(next.key)).config).toBe(changed(BASE, "Service added"));
    expect((await publisher.history()).map((e) => e.key)).toContain(next.key);
  });

  it("prune deletes the chunks no retained or pinned config names, and keeps the pinned config's", async () => {
    const { blobs, publisher, publish } = world();
    const first = await publish(BASE);
    await publisher.putPin({ key: first.key, sha256: first.sha256, pinnedAt: new Date().toISOString() });
    let config = BASE;
    for (let i = 0; i < 3; i++) {
      config = changed(config, "endpoint moved", 0.5, i);
      await publish(config);
    }
    await publisher.prune({ keep: 1 });
    // The pinned config and the newest still assemble from what is left.
    const reader = createStore(createMemoryBlobStore({ objects: blobs.objects }));
    expect((await reader.get(first.key)).config).toBe(BASE);
    expect((await reader.latest())?.key).not.toBe(first.key);
    expect((await reader.get((await reader.latest())!.key)).config).toBe(config);
    await publisher.deletePin();
    await publisher.prune({ keep: 1 });
    const chunks = [...blobs.objects.keys()].filter((k) => k.startsWith("chunks/"));
    const names = new Set(chunksOf(Buffer.from(config, "utf8")).map((c) => `chunks/${c.name}`));
    expect(chunks.every((k) => names.has(k))).toBe(true);
  });
});

describe("pruning past retention", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // Every pass past retention prunes. Reading every retained config's metadata each time to find
  // the chunks they name made each pass ~1 s longer against s3rver at 50 configs, and the next
  // pass waited for it (reconcile-rollout-load.test.ts: 100 changes in 95 s, the last 50 at ~1 s).
  it("reads no config's metadata again within a tenth of the chunks' grace, and deletes them after", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const grace = 60_000;
    const { blobs, publisher, publisherBlobs, publish } = world(grace);
    let config = BASE;
    const kept: string[] = [];
    for (let i = 0; i < 5; i++) {
      config = changed(config, "endpoint moved", 0.5, i);
      kept.push(config);
      await publish(config);
    }
    await publisher.prune({ keep: 2 });
    const chunkKeys = () => [...blobs.objects.keys()].filter((k) => k.startsWith("chunks/"));
    const published = chunkKeys().length;

    vi.setSystemTime(Date.now() + grace * 0.05);
    config = changed(config, "endpoint moved", 0.5, 9);
    kept.push(config);
    await publish(config);
    publisherBlobs.resetTraffic();
    await publisher.prune({ keep: 2 });
    expect(publisherBlobs.traffic.requests.head).toBe(0);
    expect(chunkKeys().length).toBeGreaterThan(published);

    vi.setSystemTime(Date.now() + grace * 2);
    await publisher.prune({ keep: 2 });
    const named = new Set(
      kept.slice(-2).flatMap((c) => chunksOf(Buffer.from(c, "utf8")).map((x) => `chunks/${x.name}`)),
    );
    expect(new Set(chunkKeys())).toEqual(named);
  });

  // A rollout's stable config may be a stable-track config (app/rollout-gates.ts), which prune
  // keeps as it keeps the pinned one: its key is no config key, and reading its metadata as one
  // threw, failing every pass past retention after its publish.
  it("keeps a rollout's stable-track config and prunes past it", async () => {
    const { blobs, publisher, publish } = world();
    let config = BASE;
    for (let i = 0; i < 3; i++) {
      config = changed(config, "endpoint moved", 0.5, i);
      await publish(config);
    }
    const track = await publisher.putTrack(BASE, "100");
    const newest = (await publisher.latest())!;
    await publisher.putRollout({
      version: 1,
      stable: { key: track.key, sha256: track.sha256 },
      rollout: null,
      rejected: [],
      blocked: null,
      history: [],
      updatedAt: new Date().toISOString(),
    });
    await publisher.prune({ keep: 1 });
    const reader = createStore(createMemoryBlobStore({ objects: blobs.objects }));
    expect((await reader.get(track.key)).config).toBe(BASE);
    expect((await reader.get(newest.key)).config).toBe(config);
    const names = new Set(chunksOf(Buffer.from(config, "utf8")).map((c) => `chunks/${c.name}`));
    expect([...blobs.objects.keys()].filter((k) => k.startsWith("chunks/") && !names.has(k))).toEqual([]);
  });
});

describe("a chunk that cannot be had fails the pull with a clear error", () => {
  async function coldPull(corrupt: (blobs: ReturnType<typeof world>["blobs"], chunk: string) => void) {
    const { blobs, publish } = world();
    await publish(BASE.slice(0, 1000), false);
    const big = await publish(LARGE);
    const chunk = [...blobs.objects.keys()].find((k) => k.startsWith("chunks/"))!;
    const reader = createMemoryBlobStore({ objects: blobs.objects });
    corrupt(blobs, chunk);
    return {
      error: await createStore(reader)
        .get(big.key)
        .catch((e: unknown) => e),
      chunk,
      reader,
    };
  }

  it("a missing chunk", async () => {
    const { error, chunk } = await coldPull((blobs, c) => blobs.objects.delete(c));
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ transient: false, message: expect.stringContaining(`${chunk} is missing`) });
  });

  it("a chunk that does not hash to its name", async () => {
    const { error } = await coldPull((blobs, c) => {
      const o = blobs.objects.get(c)!;
      blobs.objects.set(c, { ...o, body: Buffer.from(o.body.toString("latin1").replace("server", "sErver")) });
    });
    expect(error).toMatchObject({ transient: false, message: expect.stringContaining("does not hash to its name") });
  });

  it("a store that answers 503 to a chunk's GET: transient, tried again at the next pull", async () => {
    const { blobs, publish } = world();
    await publish(BASE.slice(0, 1000), false);
    const big = await publish(LARGE);
    const reader = createMemoryBlobStore({ objects: blobs.objects });
    reader.inject = (op, key) =>
      op === "get" && key.startsWith("chunks/") ? new Error("SlowDown (HTTP 503)") : undefined;
    const error = await createStore(reader)
      .get(big.key)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ transient: true, message: expect.stringContaining("SlowDown") });
    reader.inject = null;
    expect((await createStore(reader).get(big.key)).config).toBe(LARGE);
  });

  it("a config that assembles past the size cap is refused before any chunk is fetched", async () => {
    const { blobs, publish } = world();
    const next = await publish(BASE);
    const reader = createMemoryBlobStore({ objects: blobs.objects, maxObjectBytes: 100_000 });
    const error = await createStore(reader)
      .get(next.key)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ transient: false, message: expect.stringContaining("cap of 100000 bytes") });
    expect(reader.traffic.requests.get).toBe(1);
  });

  it("an inline chunk changed in the config's object", async () => {
    const { blobs, publish } = world();
    const next = await publish(BASE);
    const { gunzipSync, gzipSync } = await import("node:zlib");
    const o = blobs.objects.get(next.key)!;
    const tampered = gunzipSync(o.body).toString("latin1").replace("10.0.0.3:8080", "10.6.6.6:8080");
    blobs.objects.set(next.key, { ...o, body: gzipSync(Buffer.from(tampered, "latin1")) });
    const error = await createStore(createMemoryBlobStore({ objects: blobs.objects }))
      .get(next.key)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ transient: false, message: expect.stringContaining("does not hash to its name") });
  });
});
