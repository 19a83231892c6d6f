/*
 * The chunks of configs published in chunks (core/publish/content-chunks.ts,
 * core/publish/chunk-manifest.ts) in the store: uploading those a new config's newest
 * predecessor lacks, the object that names them (carrying them inline when few), and deleting
 * those no retained config names. A publisher keeps one (config-publisher.ts).
 */

import { gzipSync } from "node:zlib";
import { eachAtMost } from "../core/at-most.js";
import { formatChunkedBody } from "../core/publish/chunk-manifest.js";
import { type Chunk, chunksOf } from "../core/publish/content-chunks.js";
import { CHUNKS, type ConfigHead, type ConfigObjects } from "./config-objects.js";
import { StoreError } from "./store-error.js";
import { deleteKeys } from "./store-records.js";

/** Inline bytes a chunked config carries at most; an agent fetches chunks past that one by one. */
const INLINE_MAX = 1024 * 1024;
/** Chunks uploaded at once. */
const CHUNK_UPLOADS = 8;
/** Chunk sets of chunked configs a publisher remembers (keys are immutable): the retained history. */
const MANIFESTS_KEPT = 64;
/** Config metadata read at once when a prune finds which chunks the retained configs name. */
const HEADS_AT_ONCE = 8;
/**
 * A prune of the chunks runs at most once per this share of the grace: every pass past retention
 * prunes, and reading every retained config's metadata each time made each pass wait ~50 round
 * trips before the next could start. An unnamed chunk still waits out its grace; it is looked for
 * again at the first prune a tenth of the grace after the last.
 */
const PRUNE_EVERY_GRACE_SHARE = 0.1;

export class PublishedChunks {
  /** The chunk names of chunked configs, by key: read once per key (keys are never overwritten). */
  private readonly manifests = new Map<string, ReadonlySet<string>>();
  private readonly prefix: string;
  /** When the last prune of the chunks finished (Date.now()). */
  private prunedAt = Number.NEGATIVE_INFINITY;

  /**
   * `graceMs`: a chunk no retained config names is deleted only once it is this old: a publish
   * uploads its chunks before the config that names them, and a racing prune must not take them
   * in between.
   */
  constructor(
    private readonly objects: ConfigObjects,
    private readonly graceMs: number,
  ) {
    this.prefix = `${objects.blobs.prefix}${CHUNKS}`;
  }

  private remember(key: string, names: ReadonlySet<string>): void {
    this.manifests.set(key, names);
    if (this.manifests.size > MANIFESTS_KEPT) this.manifests.delete(this.manifests.keys().next().value!);
  }

  /** The chunks a config names (none for a config published whole). */
  async namedBy(head: ConfigHead): Promise<ReadonlySet<string>> {
    if (!head.chunked) return new Set();
    const known = this.manifests.get(head.key);
    if (known) return known;
    const blob = await this.objects.blobs.get(head.key);
    const names = new Set(blob ? this.objects.chunkNames(head.key, blob.body) : []);
    this.remember(head.key, names);
    return names;
  }

  /**
   * A chunked config's object: its manifest and the chunks the newest config lacks inline, after
   * those chunks were uploaded on their own (for agents that do not run the newest config). The
   * newest config's chunks are in the store for as long as it is retained, so they are not sent.
   */
  async body(key: string, bytes: Buffer, newest: ConfigHead | null): Promise<Buffer> {
    const { blobs } = this.objects;
    const chunks = chunksOf(bytes);
    const there = newest ? await this.namedBy(newest).catch(() => new Set<string>()) : new Set<string>();
    const fresh = new Map<string, Chunk>();
    for (const c of chunks) if (!there.has(c.name)) fresh.set(c.name, c);
    const uploads = [...fresh.values()];
    await eachAtMost(uploads, CHUNK_UPLOADS, (c) =>
      blobs.put(`${this.prefix}${c.name}`, c.bytes, { contentType: "application/octet-stream", verifiedBody: true }),
    );
    const freshBytes = uploads.reduce((n, c) => n + c.bytes.length, 0);
    const inline = freshBytes <= INLINE_MAX ? fresh : new Map<string, Chunk>();
    const carried = new Set<string>();
    const entries = chunks.map((c) => {
      // A chunk that recurs is carried once, at its first place.
      const inlined = inline.has(c.name) && !carried.has(c.name);
      if (inlined) carried.add(c.name);
      return { name: c.name, size: c.bytes.length, inline: inlined };
    });
    const inlineBytes = chunks.filter((_, i) => entries[i]!.inline).map((c) => c.bytes);
    this.remember(key, new Set(chunks.map((c) => c.name)));
    return gzipSync(formatChunkedBody(entries, inlineBytes));
  }

  /**
   * Deletes the chunks no config in `kept` names, once past their grace; at most once per tenth of
   * the grace (PRUNE_EVERY_GRACE_SHARE). A config whose metadata cannot be read names nothing, as
   * it is skipped by everyone; a store that fails keeps them all.
   */
  async prune(kept: readonly string[]): Promise<void> {
    if (Date.now() - this.prunedAt < this.graceMs * PRUNE_EVERY_GRACE_SHARE) return;
    const listed = await this.objects.blobs.list(this.prefix);
    if (listed.length > 0) {
      const named = await this.namedByAll(kept);
      const before = Date.now() - this.graceMs;
      const doomed = listed
        .filter((o) => !named.has(o.key.slice(this.prefix.length)) && o.lastModified.getTime() <= before)
        .map((o) => o.key);
      await deleteKeys(this.objects.blobs, doomed);
    }
    this.prunedAt = Date.now();
  }

  /**
   * The chunks any of `keys` names, their metadata read HEADS_AT_ONCE at a time. A stable-track
   * config (a rollout's stable, `tracks/…`) is stored whole and names none.
   */
  private async namedByAll(all: readonly string[]): Promise<Set<string>> {
    const keys = all.filter((key) => !this.objects.isTrack(key));
    const named = new Set<string>();
    await eachAtMost(keys, HEADS_AT_ONCE, async (key) => {
      const head = await this.objects.head(key).catch((err: unknown) => {
        if (err instanceof StoreError && !err.transient) return null;
        throw err;
      });
      if (head) for (const name of await this.namedBy(head)) named.add(name);
    });
    return named;
  }
}
