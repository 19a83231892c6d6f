/*
 * The publish protocol over a blob store: what one publish writes (its decisions are
 * core/publish/publish-order.ts's, pure; this module does the reads and writes they need). Keys
 * are never overwritten, and "the newest config" is the greatest key in decision order that is
 * trusted by name and whose object verifies (newest-config.ts): an untrusted newest key is
 * skipped and reported, never a reason to stop publishing. Beside the configs, the view markers
 * (view-markers.ts) and the chunks of chunked configs (published-chunks.ts); the history and its
 * pruning are config-history.ts's. Nothing depends on conditional writes, which S3-compatible
 * stores (and our test server) may lack: two publishers racing both write, and every reader
 * picks the greater key.
 */
import { type BackendLayout, layoutDigest } from "../core/model/layout-record.js";
import type { ConfigChunks } from "../core/publish/chunks.js";
import { configDigest, configHasher, digestHex, digestKind, type DigestKind } from "../core/publish/config-digest.js";
import { formatConfigName, KEY_SHA_CHARS } from "../core/publish/config-key.js";
import { decidePublish, nextSeq, pickView, storeMark } from "../core/publish/publish-order.js";
import { parseRevision } from "../core/publish/revision.js";
import { settingsDigest, type SettingsRecord } from "../core/settings/settings-record.js";
import { type ConfigHead, type ConfigObjects, type ConfigRef, configMetadata } from "./config-objects.js";
import { assertKeep, type HistoryEntry, listHistory, pruneConfigs } from "./config-history.js";
import { NewestConfig, type SkippedKey } from "./newest-config.js";
import { PublishedChunks } from "./published-chunks.js";
import type { StoreRecords } from "./store-records.js";
import { ViewMarkers } from "./view-markers.js";
import { StoreError } from "./store-error.js";

export type { HistoryEntry } from "./config-history.js";
export type { SkippedKey } from "./newest-config.js";

/**
 * Bodies a publish reads, at most, before it takes a config ahead of the live cluster as a
 * regression (see publish): each that does not verify is skipped, and the rest cost one epoch.
 */
const BODIES_CHECKED = 4;

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
  const viewMarkers = new ViewMarkers(blobs);
  const chunks = new PublishedChunks(objects, options.chunkGraceMs ?? 10 * 60_000);
  const newestConfig = new NewestConfig(objects);

  /** The newest config's digest as the last publish saw or left it (see expectUnchanged). */
  let lastNewestSha: string | null = null;
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
      newestConfig.list(),
      expectUnchanged ? null : viewMarkers.list(),
    ]);
    const { entry: newestEntry, head: newestHead, skipped } = await newestConfig.find(configs, anchor);
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
    const views = listedViews ?? (viewsMatter ? await viewMarkers.list() : []);
    lastNewestSha = newestHead?.sha256 ?? null;
    newestConfig.saw(newestHead);
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
      const view = await viewMarkers.record(decision.view, generator, views);
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
          newestConfig.reject(newestHead.key, problem);
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
      ? await chunks.body(
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
    newestConfig.wrote({
      ...ref,
      generator,
      epoch: decision.epoch,
      seq: decision.seq,
      settingsDigest: settings ?? null,
      layoutDigest: layout ?? null,
      ...(input.chunked ? { chunked: true } : {}),
    });
    lastNewestSha = sha;
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
      ...(newestConfig.count > retain ? { pruneDue: true } : {}),
    };
  }

  return {
    publish,
    prune: ({ keep = retain } = {}) => pruneConfigs({ objects, records, newest: newestConfig, chunks }, keep),
    async newest() {
      const { head, skipped } = await newestConfig.find(await objects.list());
      return { config: head, skipped };
    },
    history: ({ limit } = {}) => listHistory(objects, limit),
  };
}

const maxRevision = (a: bigint, b: bigint): bigint => (a > b ? a : b);

function digestInKind(kind: DigestKind, config: string | Uint8Array | HashedConfig): string {
  return isHashed(config) ? configHasher(kind).digest(config.chunks) : configDigest(kind, config);
}

function isHashed(config: string | Uint8Array | HashedConfig): config is HashedConfig {
  return typeof config !== "string" && !(config instanceof Uint8Array);
}
