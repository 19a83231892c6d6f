/*
 * The publish protocol over a blob store: which config is newest, what one publish writes (its
 * decisions are core/publish/publish-order.ts's, pure; this module does the reads and writes they need),
 * the history, and its pruning. Keys are never overwritten, and "the newest config" is the
 * greatest key in decision order that is trusted by name (core/publish/key-trust.ts: it leads the key
 * before it by a bounded step) and whose object verifies: a far-ahead, missing, mis-shaped or
 * unverifiable newest key is skipped and reported, never a reason to stop publishing. Beside the
 * configs, views/<epoch>-<revision>: a pass that found nothing to change saw this view (no
 * config). Nothing depends on conditional writes, which S3-compatible stores (and our test
 * server) may lack: two publishers racing both write, and every reader picks the greater key.
 */
import { layoutDigest, type BackendLayout } from "../core/model/layout-record.js";
import type { ConfigChunks } from "../core/publish/chunks.js";
import { configDigest, configHasher, digestHex, digestKind, type DigestKind } from "../core/publish/config-digest.js";
import {
  compareConfigNames,
  compareMarks,
  formatConfigName,
  formatViewName,
  KEY_SHA_CHARS,
  parseViewName,
  type Mark,
} from "../core/publish/config-key.js";
import { judgeKeys } from "../core/publish/key-trust.js";
import { decidePublish, nextSeq, pickView, storeMark } from "../core/publish/publish-order.js";
import { parseRevision } from "../core/publish/revision.js";
import { settingsDigest, type SettingsRecord } from "../core/settings/settings-record.js";
import {
  CHUNKS,
  type ConfigEntry,
  type ConfigHead,
  type ConfigObjects,
  type ConfigRef,
  configMetadata,
} from "./config-objects.js";
import { deleteKeys, type StoreRecords } from "./store-records.js";
import { gzipSync } from "node:zlib";
import { formatChunkedBody } from "../core/publish/chunk-manifest.js";
import { type Chunk, chunksOf } from "../core/publish/content-chunks.js";
import { StoreError } from "./store-error.js";

const VIEWS = "views/";
/** View markers kept: only the newest counts; a few more cover a racing pass's delete. */
const VIEWS_KEPT = 5;
/**
 * Bodies a publish reads, at most, before it takes a config ahead of the live cluster as a
 * regression (see publish): each that does not verify is skipped, and the rest cost one epoch.
 */
const BODIES_CHECKED = 4;
/** Verified keys a publisher remembers: the newest few are all it looks at. */
const VERIFIED_KEPT = 8;
/** Rejected keys a publisher remembers: a few passes' worth of BODIES_CHECKED. */
const REJECTED_KEPT = 64;
/** Inline bytes a chunked config carries at most; an agent fetches chunks past that one by one. */
const INLINE_MAX = 1024 * 1024;
/** Chunks uploaded at once. */
const CHUNK_UPLOADS = 8;
/** Chunk sets of chunked configs a publisher remembers (keys are immutable): the retained history. */
const MANIFESTS_KEPT = 64;

/** A key that looked newest but could not be trusted. */
export interface SkippedKey {
  key: string;
  reason: string;
}

/** A rendered config as its chunks and their digest (a render's result is one). */
export interface HashedConfig extends ConfigChunks {
  readonly sha256: string;
}

export interface PublishInput {
  /**
   * The config body; the renderer's bytes go out as they are, text is sent as UTF-8. A rendered
   * config comes with its digest, so an unchanged config is recognised without a copy or a hash
   * here; its chunks are joined only when it is written (an SDK retry needs a body it can send
   * twice).
   */
  config: string | Uint8Array | HashedConfig;
  /** The kind of digest text or bytes are published by; a HashedConfig's digest says its own. Default sha256. */
  digest?: DigestKind;
  /** The snapshot's revision: the highest metadata.resourceVersion of the list responses. */
  revision: string;
  /** Version string of the software that rendered the config. */
  generator: string;
  /** Recorded beside the config (settings/<digest>.json). */
  settings?: SettingsRecord;
  /** Recorded beside the config (layouts/<digest>.json): where a cold instance places Services from. */
  layout?: BackendLayout;
  /**
   * The live cluster's revision, by a fresh list. Without it a snapshot below the store's mark is
   * simply stale; with it, a cluster that went back is told apart (status `regressed`).
   */
  liveRevision?: () => Promise<string>;
  /** The snapshot was listed after a regression was seen: below the store's mark, it starts the next epoch. */
  restore?: boolean;
  /**
   * Publish only over this newest key: when another config has become the newest since (another
   * instance published), nothing is written and the status is stale. A warm instance's head start
   * publishes so (app/reconcile.ts).
   */
  expectedNewest?: string;
  /**
   * Publish in chunks (core/publish/content-chunks.ts, core/publish/chunk-manifest.ts): only the chunks the newest
   * config lacks are uploaded, and carried inline in the config's object. Only for a fleet whose
   * every agent reads chunked configs (app/agent-reports.ts).
   */
  chunked?: boolean;
}

export interface PublishResult {
  /**
   * published: written. unchanged: identical to the newest config, no config written (a view
   * marker may be). stale: a newer view is recorded, nothing written. regressed: the live cluster
   * is behind the store's mark, or the snapshot ahead of the live cluster: list again and
   * publish with `restore`.
   */
  status: "published" | "unchanged" | "stale" | "regressed";
  /** Where this config lives: the written key, the identical newest key, or the key it would have had. */
  key: string;
  sha256: string;
  epoch: number;
  /** The newest config as far as this publish knows. */
  newest: ConfigRef;
  /** Keys newer than the newest verified config that could not be trusted. */
  skipped: SkippedKey[];
  /** Published into a new epoch (the cluster's revisions went back). */
  newEpoch?: boolean;
  /** The view marker written (unchanged). */
  view?: string;
  /** regressed: what was compared. */
  regression?: { mark: { epoch: number; revision: string }; live: string; snapshot: string };
  /**
   * The store holds more configs than it retains once this one is in: the caller prunes (prune())
   * after pinging the agents, so that the clean-up never delays a new config reaching them.
   */
  pruneDue?: true;
}

export interface HistoryEntry {
  key: string;
  epoch: number;
  revision: string;
  seq: number;
  sha256Prefix: string;
  size: number;
  lastModified: Date;
  /** Why the key may not be followed (core/publish/key-trust.ts): publishers, agents and `status` skip it. */
  untrusted?: string;
}

export interface ConfigPublisher {
  publish(input: PublishInput): Promise<PublishResult>;
  /** The newest trusted config that verifies, and the newer keys skipped on the way. */
  newest(): Promise<{ config: ConfigHead | null; skipped: SkippedKey[] }>;
  /** Newest first, in decision order; keys only, each judged by name (`untrusted`). */
  history(options?: { limit?: number }): Promise<HistoryEntry[]>;
  /**
   * Deletes every config older than the newest `keep` trusted ones (keep >= 1; default: the
   * store's retention), never the pinned one nor those rollout.json names; returns the deleted keys.
   */
  prune(options?: { keep?: number }): Promise<string[]>;
}

export interface PublisherOptions {
  /** How many configs prune() keeps by default. Default 50. */
  retain?: number;
  /**
   * A chunk no retained config names is deleted only once it is this old (default 10 minutes): a
   * publish uploads its chunks before the config that names them, and a racing prune must not
   * take them in between.
   */
  chunkGraceMs?: number;
}

export function createPublisher(
  objects: ConfigObjects,
  records: StoreRecords,
  options: PublisherOptions = {},
): ConfigPublisher {
  const { blobs } = objects;
  const retain = options.retain ?? 50;
  assertKeep(retain, "retain");
  const viewsPrefix = `${blobs.prefix}${VIEWS}`;
  const chunksPrefix = `${blobs.prefix}${CHUNKS}`;
  const chunkGraceMs = options.chunkGraceMs ?? 10 * 60_000;

  /** The chunk names of chunked configs, by key: read once per key (keys are never overwritten). */
  const manifests = new Map<string, ReadonlySet<string>>();
  function rememberManifest(key: string, names: ReadonlySet<string>): void {
    manifests.set(key, names);
    if (manifests.size > MANIFESTS_KEPT) manifests.delete(manifests.keys().next().value!);
  }
  /** The chunks a config names (none for a config published whole). */
  async function chunksNamedBy(head: ConfigHead): Promise<ReadonlySet<string>> {
    if (!head.chunked) return new Set();
    const known = manifests.get(head.key);
    if (known) return known;
    const blob = await blobs.get(head.key);
    const names = new Set(blob ? objects.chunkNames(head.key, blob.body) : []);
    rememberManifest(head.key, names);
    return names;
  }

  /**
   * A chunked config's object: its manifest and the chunks the newest config lacks inline, after
   * those chunks were uploaded on their own (for agents that do not run the newest config). The
   * newest config's chunks are in the store for as long as it is retained, so they are not sent.
   */
  async function chunkedBody(key: string, bytes: Buffer, newest: ConfigHead | null): Promise<Buffer> {
    const chunks = chunksOf(bytes);
    const there = newest ? await chunksNamedBy(newest).catch(() => new Set<string>()) : new Set<string>();
    const fresh = new Map<string, Chunk>();
    for (const c of chunks) if (!there.has(c.name)) fresh.set(c.name, c);
    const uploads = [...fresh.values()];
    let next = 0;
    const upload = async () => {
      while (next < uploads.length) {
        const c = uploads[next++]!;
        await blobs.put(`${chunksPrefix}${c.name}`, c.bytes, {
          contentType: "application/octet-stream",
          verifiedBody: true,
        });
      }
    };
    await Promise.all(Array.from({ length: Math.min(CHUNK_UPLOADS, uploads.length) }, upload));
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
    rememberManifest(key, new Set(chunks.map((c) => c.name)));
    return gzipSync(formatChunkedBody(entries, inlineBytes));
  }

  async function listViews(): Promise<Array<{ key: string; mark: Mark }>> {
    const views: Array<{ key: string; mark: Mark }> = [];
    for (const object of await blobs.list(viewsPrefix)) {
      const mark = parseViewName(object.key.slice(viewsPrefix.length));
      if (mark) views.push({ key: object.key, mark });
    }
    return views.sort((a, b) => compareMarks(a.mark, b.mark));
  }

  /**
   * Deletes the chunks no config in `kept` names, once past their grace. A config whose metadata
   * cannot be read names nothing, as it is skipped by everyone; a store that fails keeps them all.
   */
  async function pruneChunks(kept: readonly string[]): Promise<void> {
    const listed = await blobs.list(chunksPrefix);
    if (listed.length === 0) return;
    const named = new Set<string>();
    for (const key of kept) {
      const head = await objects.head(key).catch((err: unknown) => {
        if (err instanceof StoreError && !err.transient) return null;
        throw err;
      });
      if (head) for (const name of await chunksNamedBy(head)) named.add(name);
    }
    const before = Date.now() - chunkGraceMs;
    const doomed = listed
      .filter((o) => !named.has(o.key.slice(chunksPrefix.length)) && o.lastModified.getTime() <= before)
      .map((o) => o.key);
    await deleteKeys(blobs, doomed);
  }

  async function prune({ keep = retain }: { keep?: number } = {}): Promise<string[]> {
    assertKeep(keep, "keep");
    const pinned = await records.getPin().catch(() => null);
    // The configs a canary rollout has nodes run (core/rollout/rollout.ts) stay, as the pinned one does.
    const rollout = await records.getRollout().catch(() => null);
    const held = new Set(
      [pinned?.key, rollout?.stable.key, rollout?.rollout?.candidate.key].filter((k): k is string => k !== undefined),
    );
    const configs = await objects.list();
    // Counted in trusted keys: far-ahead keys, which sort newest, must not push the history out.
    const verdicts = judgeKeys(configs.map((e) => e.name));
    const trusted = configs.filter((_, i) => verdicts[i] === null);
    const oldestKept = trusted.length > keep ? trusted[trusted.length - keep]!.name : null;
    const older = oldestKept ? configs.filter((e) => compareConfigNames(e.name, oldestKept) < 0) : [];
    const doomed = older.map((entry) => entry.key).filter((key) => !held.has(key));
    await deleteKeys(blobs, doomed);
    knownCount = configs.length - doomed.length;
    // Only a cold function instance reads a layout, and only the newest config's: older records
    // (one per Service added or removed) are deleted. One that a racing publish wrote a moment ago
    // may go too; its instance holds it in memory, and another would start afresh (one reload).
    const retained = configs.slice(older.length);
    await records.pruneLayouts((await findNewest(retained)).head?.layoutDigest);
    await pruneChunks([...retained.map((e) => e.key), ...held]);
    return doomed;
  }

  /**
   * The newest entry trusted by name whose object verifies, walking down from the greatest key. A
   * key that is not (far ahead, gone, hand-made, forged) is skipped and reported; a store that
   * fails is an error. `anchor`: a key verified before, which stands for the history before it.
   */
  async function findNewest(
    configs: readonly ConfigEntry[],
    anchor?: string,
  ): Promise<{ entry: ConfigEntry | null; head: ConfigHead | null; skipped: SkippedKey[] }> {
    const skipped: SkippedKey[] = [];
    const at = anchor === undefined ? -1 : configs.findIndex((e) => e.key === anchor);
    const verdicts = judgeKeys(
      configs.map((e) => e.name),
      at < 0 ? undefined : at,
    );
    for (let i = configs.length - 1; i >= 0; i--) {
      const entry = configs[i]!;
      const distrusted = verdicts[i] ?? rejected.get(entry.key);
      if (distrusted !== undefined) {
        skipped.push({ key: entry.key, reason: distrusted });
        continue;
      }
      try {
        const head = verified.get(entry.key) ?? (await objects.head(entry.key, entry.name));
        remember(head);
        return { entry, head, skipped };
      } catch (err) {
        if (!(err instanceof StoreError) || err.transient) throw err;
        skipped.push({ key: entry.key, reason: err.message });
      }
    }
    return { entry: null, head: null, skipped };
  }

  /**
   * Keys this instance verified (or wrote), so that a warm instance heads the newest key once, not
   * on every pass. Sound because keys are never overwritten, and only keys still listed are looked up.
   */
  const verified = new Map<string, ConfigHead>();
  function remember(head: ConfigHead): void {
    verified.delete(head.key);
    verified.set(head.key, head);
    if (verified.size > VERIFIED_KEPT) verified.delete(verified.keys().next().value!);
  }

  /**
   * Keys whose metadata verifies but whose body does not (publish reads a body before it takes a
   * config ahead of the live cluster as a regression): skipped like keys that do not verify.
   */
  const rejected = new Map<string, string>();
  function reject(key: string, reason: string): void {
    // No longer an anchor to list from (configsFromNewest): the history below it decides.
    verified.delete(key);
    rejected.set(key, reason);
    if (rejected.size > REJECTED_KEPT) rejected.delete(rejected.keys().next().value!);
  }

  /** The newest config's digest as the last publish saw or left it (see expectUnchanged). */
  let lastNewestSha: string | null = null;
  /** The newest config's key as the last publish saw or left it, verified (see configsFromNewest). */
  let lastNewestKey: string | null = null;
  /** How many configs the store holds, as far as this store object saw: an over-count only prunes sooner. */
  let knownCount = 0;

  /**
   * The configs a publish decides from: the newest one it last saw or left and every key after it
   * (ListObjectsV2 StartAfter), not the whole retained history: a store that reads each object's
   * metadata to list it (s3rver) reads one or two (BENCHMARKS.md). The same newest as a
   * full listing: a key in the current format is fixed-width, so every key newer in decision order
   * sorts after it as a string — epochs, revisions and seqs are zero-padded, and the first
   * format's keys (`<revision>-<sha>.cfg`, epoch 0) sort after every epoch-0 key of this one and
   * before every later epoch. Hence only from a key of the current format: from a first-format
   * key, newer current-format keys of epoch 0 would sort before it. The listing starts just before
   * that key, so it is in the answer when it still exists; when it is not (deleted, a store put
   * back), the whole history is listed. That key, verified, is the anchor the keys after it are
   * judged from (core/publish/key-trust.ts).
   */
  async function configsFromNewest(): Promise<{ configs: ConfigEntry[]; anchor?: string }> {
    const from = lastNewestKey;
    if (from !== null && verified.has(from) && objects.parseKey(from)?.legacy === false) {
      const startAfter = from.slice(0, -1);
      const after = await objects.list(startAfter);
      if (after.some((e) => e.key === from)) {
        // A store that ignores StartAfter answers with the whole history: then that is the count.
        knownCount = after.some((e) => e.key <= startAfter) ? after.length : knownCount + after.length - 1;
        return { configs: after, anchor: from };
      }
    }
    const all = await objects.list();
    knownCount = all.length;
    return { configs: all };
  }
  /** A tree1 digest found to name the same bytes as a sha256 newest (see crossKind), and that sha256. */
  let sameBytes: { ours: string; newest: string } | null = null;

  /** `bodiesChecked`: the configs ahead of the live cluster this publish found not to verify (see `behind`). */
  async function publish(input: PublishInput, bodiesChecked = 0): Promise<PublishResult> {
    const { config, generator } = input;
    const ours = parseRevision(input.revision);
    if (!/^[\x20-\x7e]*$/.test(generator)) {
      throw new Error(
        `generator must be printable ASCII (it is sent as an HTTP header), got ${JSON.stringify(generator)}`,
      );
    }
    if (isHashed(config) && input.digest !== undefined && digestKind(config.sha256) !== input.digest)
      throw new Error(`the config was hashed by ${digestKind(config.sha256)}, not by ${input.digest} as asked`);
    const sha = isHashed(config) ? config.sha256 : configDigest(input.digest ?? "sha256", config);
    // A warm instance that last saw these very bytes newest expects "unchanged", which needs only
    // the configs listing (the views listing only when the snapshot is newer than that config: a
    // marker may be due). Otherwise the live revision (needed before any write and when behind)
    // and both listings go out together, so that they add requests but no wait.
    const expectUnchanged =
      !input.restore && (lastNewestSha === sha || (sameBytes?.ours === sha && sameBytes.newest === lastNewestSha));
    const probe = input.liveRevision;
    let live: Promise<bigint> | undefined;
    const liveRevision = () => (live ??= probe!().then(parseRevision));
    if (probe && !input.restore && !expectUnchanged) liveRevision().catch(() => undefined);
    const [{ configs, anchor }, listedViews] = await Promise.all([
      configsFromNewest(),
      expectUnchanged ? null : listViews(),
    ]);
    const { entry: newestEntry, head: newestHead, skipped } = await findNewest(configs, anchor);
    // A tree1 publisher takes a sha256 config of the same bytes as its own: every agent verifies
    // sha256, so a switch to tree1 (or an instance that has not switched yet) publishes nothing
    // again. A sha256 publisher does not take a tree1 one: it publishes by sha256 because some
    // agent verifies nothing else, and that agent needs these bytes under a sha256.
    const crossKind = newestHead && digestKind(sha) === "tree1" && digestKind(newestHead.sha256) === "sha256";
    const known = crossKind && sameBytes?.ours === sha && sameBytes.newest === newestHead.sha256;
    const comparable = !crossKind ? sha : known ? newestHead.sha256 : digestInKind("sha256", config);
    sameBytes = crossKind && comparable === newestHead.sha256 ? { ours: sha, newest: newestHead.sha256 } : null;
    // Same bytes at or below the newest config's revision: unchanged with no marker, whatever the views.
    const viewsMatter = !(newestEntry && newestHead?.sha256 === comparable && ours <= newestEntry.name.revision);
    const views = listedViews ?? (viewsMatter ? await listViews() : []);
    lastNewestSha = newestHead?.sha256 ?? null;
    lastNewestKey = newestHead?.key ?? null;
    // A marker above the snapshot counts only if the live cluster has reached it (pickView): the
    // fresh list is read for that only, and it is on its way already unless unchanged was expected.
    const above = views.some((v) => v.mark.epoch === newestEntry?.name.epoch && v.mark.revision > ours);
    const seen = !probe ? null : above ? maxRevision(ours, await liveRevision()) : ours;
    const state = {
      newest: newestEntry && newestHead && { name: newestEntry.name, sha256: newestHead.sha256 },
      view: pickView(
        views.map((v) => v.mark),
        newestEntry?.name ?? null,
        seen,
      ),
    };
    const decision = decidePublish(state, { revision: ours, sha256: comparable }, input.restore ?? false);
    const newest = (fallback: ConfigRef): ConfigRef =>
      newestHead ? { key: newestHead.key, sha256: newestHead.sha256, revision: newestHead.revision } : fallback;
    const keyAt = (epoch: number, seq: number) =>
      `${objects.configsPrefix}${formatConfigName({ epoch, revision: ours, seq, shaPrefix: digestHex(sha).slice(0, KEY_SHA_CHARS) })}`;
    const seqAt = (epoch: number) => nextSeq(newestEntry?.name ?? null, epoch, ours);

    if (input.expectedNewest !== undefined && newestHead?.key !== input.expectedNewest) {
      const key = keyAt(storeMark(state)?.epoch ?? 0, seqAt(storeMark(state)?.epoch ?? 0));
      return {
        status: "stale",
        key,
        sha256: sha,
        epoch: storeMark(state)?.epoch ?? 0,
        newest: newest({ key, sha256: sha, revision: "" }),
        skipped,
      };
    }

    if (decision.kind === "unchanged") {
      const result: PublishResult = {
        status: "unchanged",
        key: newestHead!.key,
        // The digest of the key named, which is ours in another kind when crossKind.
        sha256: newestHead!.sha256,
        epoch: newestEntry!.name.epoch,
        newest: newest({ key: "", sha256: sha, revision: "" }),
        skipped,
      };
      if (!decision.view) return result;
      const mark = decision.view;
      const view = `${viewsPrefix}${formatViewName(mark)}`;
      await blobs.put(view, JSON.stringify({ generator }), { contentType: "application/json" });
      // Only the newest marker counts; a failed clean-up is retried by the next marker. Markers
      // above this one did not count (forged, or of a cluster that went back): left for the operator.
      const below = views.filter((v) => compareMarks(v.mark, mark) < 0);
      await deleteKeys(
        blobs,
        below.slice(0, -(VIEWS_KEPT - 1)).map((v) => v.key),
      ).catch(() => undefined);
      return { ...result, view };
    }

    if (decision.kind === "behind") {
      const key = keyAt(decision.mark.epoch, seqAt(decision.mark.epoch));
      const stale: PublishResult = {
        status: "stale",
        key,
        sha256: sha,
        epoch: decision.mark.epoch,
        newest: newest({ key, sha256: sha, revision: "" }),
        skipped,
      };
      if (!probe) return stale;
      const live = await liveRevision();
      // The live cluster is at or past the recorded view: this pass listed before it, i.e. is stale.
      if (live >= decision.mark.revision) return stale;
      // Markers above the live cluster do not count, so the newest config is ahead of it: the
      // history of a cluster that went back, or another writer's key. Agents follow key order, so
      // only the next epoch goes past it; but a config whose body does not verify is skipped, as
      // every agent skips it, and costs nothing.
      if (newestHead && bodiesChecked < BODIES_CHECKED) {
        const problem = await objects.get(newestHead.key).then(
          () => null,
          (err: unknown) => {
            if (!(err instanceof StoreError) || err.transient) throw err;
            return err.message;
          },
        );
        if (problem !== null) {
          reject(newestHead.key, problem);
          return publish(input, bodiesChecked + 1);
        }
      }
      return {
        ...stale,
        status: "regressed",
        regression: {
          mark: { epoch: decision.mark.epoch, revision: decision.mark.revision.toString() },
          live: live.toString(),
          snapshot: ours.toString(),
        },
      };
    }

    const key = keyAt(decision.epoch, decision.seq);
    const ref: ConfigRef = { key, sha256: sha, revision: ours.toString() };
    if (probe && !input.restore) {
      // A snapshot ahead of the live cluster was listed before the cluster went back (a pass that
      // overlapped a restore): it must not publish into the epoch of the restored cluster.
      const live = await liveRevision();
      if (ours > live) {
        const mark = storeMark(state)!;
        return {
          status: "regressed",
          key,
          sha256: sha,
          epoch: decision.epoch,
          newest: newest(ref),
          skipped,
          regression: {
            mark: { epoch: mark.epoch, revision: mark.revision.toString() },
            live: live.toString(),
            snapshot: ours.toString(),
          },
        };
      }
    }

    let settings: string | undefined;
    if (input.settings) {
      // Content-addressed: written when the newest config was made with other settings, else already there.
      const digest = settingsDigest(input.settings);
      settings = newestHead?.settingsDigest === digest ? digest : await records.putSettings(input.settings);
    }
    let layout: string | undefined;
    if (input.layout) {
      // Changes only when a Service is added or removed: endpoint changes write no record.
      const digest = layoutDigest(input.layout);
      layout = newestHead?.layoutDigest === digest ? digest : await records.putLayout(input.layout);
    }
    const metadata = configMetadata({
      digest: sha,
      revision: ref.revision,
      generator,
      epoch: decision.epoch,
      seq: decision.seq,
      bytes: typeof config === "string" ? Buffer.byteLength(config) : config.byteLength,
      settings,
      layout,
      chunked: input.chunked,
    });
    const whole = isHashed(config) ? Buffer.concat(config.chunks, config.byteLength) : config;
    const body = input.chunked
      ? await chunkedBody(
          key,
          typeof whole === "string"
            ? Buffer.from(whole, "utf8")
            : Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength),
          newestHead,
        )
      : whole;
    await blobs.put(key, body, {
      contentType: input.chunked ? "application/vnd.servicelb.chunks1+gzip" : "text/plain; charset=utf-8",
      metadata,
      verifiedBody: true,
    });
    remember({
      ...ref,
      generator,
      epoch: decision.epoch,
      seq: decision.seq,
      settingsDigest: settings ?? null,
      layoutDigest: layout ?? null,
      ...(input.chunked ? { chunked: true } : {}),
    });
    lastNewestSha = sha;
    lastNewestKey = key;
    knownCount++;
    // After the config: a poll that reads the hint finds the object there.
    await records.putNewestHint({ key, sha256: sha });
    sameBytes = null;

    return {
      status: "published",
      key,
      sha256: sha,
      epoch: decision.epoch,
      newest: ref,
      skipped,
      ...(decision.newEpoch ? { newEpoch: true } : {}),
      // The listing above already says whether anything is past retention: no second list otherwise.
      ...(knownCount > retain ? { pruneDue: true } : {}),
    };
  }

  return {
    publish,
    prune,
    async newest() {
      const { head, skipped } = await findNewest(await objects.list());
      return { config: head, skipped };
    },
    async history({ limit } = {}) {
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) {
        throw new Error(`history limit must be an integer >= 0, got ${limit}`);
      }
      const entries = await objects.list();
      const verdicts = judgeKeys(entries.map((e) => e.name));
      const described = entries.map((entry, i) => ({
        key: entry.key,
        epoch: entry.name.epoch,
        revision: entry.name.revision.toString(),
        seq: entry.name.seq,
        sha256Prefix: entry.name.shaPrefix,
        size: entry.size,
        lastModified: entry.lastModified,
        ...(verdicts[i] === null ? {} : { untrusted: verdicts[i]! }),
      }));
      return described.reverse().slice(0, limit ?? described.length);
    },
  };
}

function assertKeep(keep: number, name: string): void {
  if (!Number.isInteger(keep) || keep < 1) {
    throw new Error(`${name} must be an integer >= 1 (the newest config is never deleted), got ${keep}`);
  }
}

const maxRevision = (a: bigint, b: bigint): bigint => (a > b ? a : b);

function digestInKind(kind: DigestKind, config: string | Uint8Array | HashedConfig): string {
  return isHashed(config) ? configHasher(kind).digest(config.chunks) : configDigest(kind, config);
}

function isHashed(config: string | Uint8Array | HashedConfig): config is HashedConfig {
  return typeof config !== "string" && !(config instanceof Uint8Array);
}
