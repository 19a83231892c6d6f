/*
 * The store as its users see it — the reconcile function, the agents and the CLI commands — made
 * of its parts: a blob store (S3, or memory in tests), the configs on it (config-objects.ts), the
 * publish protocol (config-publisher.ts) and the records beside them (store-records.ts).
 */
import type { BlobStore } from "./blob-store.js";
import { ConfigObjects, type ConfigHead, type StoredConfig } from "./config-objects.js";
import {
  type ConfigPublisher,
  createPublisher,
  type HistoryEntry,
  type PublishInput,
  type PublisherOptions,
  type PublishResult,
  type SkippedKey,
} from "./config-publisher.js";
import { createS3BlobStore, type S3BlobStoreOptions } from "./s3-blob-store.js";
import { storeRecords, type StoreRecords } from "./store-records.js";

export type { BlobStore } from "./blob-store.js";
export type { ConfigHead, ConfigRef, StoredConfig } from "./config-objects.js";
export type { HashedConfig, HistoryEntry, PublishInput, PublishResult, SkippedKey } from "./config-publisher.js";
export { type PassRecord, passRecordSchema, type Pin, pinSchema, type StatusRead } from "./store-records.js";
export { StoreError } from "./store-error.js";

export interface ObjectStoreOptions extends S3BlobStoreOptions {
  /** How many configs prune() keeps by default (publish() says when that is exceeded). Default 50. */
  retain?: number;
}

export interface ObjectStore
  extends ConfigPublisher,
    Omit<StoreRecords, "putSettings" | "putLayout" | "pruneLayouts" | "putNewestHint"> {
  readonly bucket: string;
  readonly prefix: string;
  /** The endpoint as named in error messages. */
  readonly endpoint: string;
  publish(input: PublishInput): Promise<PublishResult>;
  /** The newest config that verifies. */
  latest(): Promise<ConfigHead | null>;
  /** A config's metadata, verified against its key (a StoreError, not transient, when it does not verify). */
  head(key: string): Promise<ConfigHead>;
  /**
   * Fetches a config and verifies its body against its metadata and key. `have`: the text of a
   * config the caller holds (an agent's running one), whose chunks a chunked config need not fetch.
   */
  get(key: string, options?: { have?: string }): Promise<StoredConfig>;
  /** Newest first, in decision order; keys only (see head()), each judged by name (`untrusted`). */
  history(options?: { limit?: number }): Promise<HistoryEntry[]>;
  /** The newest trusted config that verifies, and the newer keys skipped on the way. */
  newest(): Promise<{ config: ConfigHead | null; skipped: SkippedKey[] }>;
  /** Stores a canary rollout's stable-track config (docs/design.md#canary-rollouts); get() reads it back. */
  putTrack(text: string, revision: string): Promise<StoredConfig>;
  /** Deletes the stable-track configs but those named. */
  pruneTracks(keep: readonly string[]): Promise<void>;
  /** Releases the client's sockets. */
  close(): void;
}

/** The store on any blob store (see PublisherOptions for the options). */
export function createStore(blobs: BlobStore, options: PublisherOptions = {}): ObjectStore {
  const objects = new ConfigObjects(blobs);
  const records = storeRecords(blobs);
  const publisher = createPublisher(objects, records, options);
  return {
    bucket: blobs.bucket,
    prefix: blobs.prefix,
    endpoint: blobs.endpoint,
    publish: (input) => publisher.publish(input),
    newest: () => publisher.newest(),
    latest: async () => (await publisher.newest()).config,
    history: (o) => publisher.history(o),
    prune: (o) => publisher.prune(o),
    head: (key) => objects.head(key),
    get: (key, o) => objects.get(key, o),
    putTrack: (text, revision) => objects.putTrack(text, revision),
    pruneTracks: (keep) => objects.pruneTracks(keep),
    readSettings: (digest) => records.readSettings(digest),
    readLayout: (digest) => records.readLayout(digest),
    getPin: () => records.getPin(),
    putPin: (pin) => records.putPin(pin),
    deletePin: () => records.deletePin(),
    getRollout: () => records.getRollout(),
    putRollout: (record) => records.putRollout(record),
    deleteRollout: () => records.deleteRollout(),
    getPassRecord: () => records.getPassRecord(),
    putPassRecord: (record) => records.putPassRecord(record),
    getNewestHint: () => records.getNewestHint(),
    putStatus: (node, status) => records.putStatus(node, status),
    listStatuses: () => records.listStatuses(),
    readStatuses: () => records.readStatuses(),
    close: () => blobs.close(),
  };
}

/** The store on S3 or an S3-compatible server. */
export function createObjectStore(options: ObjectStoreOptions): ObjectStore {
  return createStore(createS3BlobStore(options), { retain: options.retain });
}
