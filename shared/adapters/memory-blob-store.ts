/*
 * A blob store in memory, with S3's semantics as the protocol relies on them (listings in key
 * order from StartAfter, a missing object read as none, the size cap refusing a body unread), so
 * the publish protocol's tests and the fleet bench run without a server. It counts requests and
 * bytes each way, and can be made slow or failing per request, as a loaded S3 is (503 SlowDown).
 */
import type { Blob, BlobEntry, BlobStore, PutOptions } from "./blob-store.js";
import { StoreError } from "./store-error.js";
import { DEFAULT_MAX_OBJECT_BYTES, ObjectTooLargeError } from "./store-limits.js";

export type BlobOperation = "get" | "head" | "put" | "list" | "delete";

export interface MemoryBlobStoreOptions {
  /** s3://bucket[/prefix]-like name, for messages; default mem://test. */
  bucket?: string;
  prefix?: string;
  maxObjectBytes?: number;
  /** Objects shared with other stores (another process's view of the same bucket). */
  objects?: Map<string, StoredBlob>;
}

export interface StoredBlob {
  body: Buffer;
  contentType: string;
  metadata: Record<string, string>;
  lastModified: Date;
}

/** What went through the store, by operation: requests and body bytes. */
export interface BlobTraffic {
  requests: Record<BlobOperation, number>;
  bytesIn: number;
  bytesOut: number;
}

export interface MemoryBlobStore extends BlobStore {
  readonly objects: Map<string, StoredBlob>;
  readonly traffic: BlobTraffic;
  /**
   * Called before each request: an Error it returns fails the request (a StoreError as given, any
   * other as a transient one, as a 503 would be); a number delays it by that many milliseconds.
   */
  inject: ((operation: BlobOperation, key: string) => Error | number | undefined) | null;
  resetTraffic(): void;
}

export function createMemoryBlobStore(options: MemoryBlobStoreOptions = {}): MemoryBlobStore {
  const bucket = options.bucket ?? "memory";
  const prefix = options.prefix ?? "";
  const maxObjectBytes = options.maxObjectBytes ?? DEFAULT_MAX_OBJECT_BYTES;
  const objects = options.objects ?? new Map<string, StoredBlob>();
  const describe = (key: string) => `mem://${bucket}/${key}`;
  const emptyTraffic = (): BlobTraffic => ({
    requests: { get: 0, head: 0, put: 0, list: 0, delete: 0 },
    bytesIn: 0,
    bytesOut: 0,
  });
  let closed = false;

  const store: MemoryBlobStore = {
    bucket,
    prefix,
    endpoint: "memory",
    maxObjectBytes,
    objects,
    traffic: emptyTraffic(),
    inject: null,
    describe,
    resetTraffic() {
      Object.assign(store.traffic, emptyTraffic());
    },

    async get(key) {
      await request("get", key);
      const o = objects.get(key);
      if (!o) return null;
      if (o.body.length > maxObjectBytes)
        throw new StoreError(
          `memory get of ${describe(key)} failed: ${new ObjectTooLargeError(o.body.length, maxObjectBytes).message}`,
          {
            transient: false,
            cause: new ObjectTooLargeError(o.body.length, maxObjectBytes),
          },
        );
      store.traffic.bytesOut += o.body.length;
      return { body: Buffer.from(o.body), metadata: { ...o.metadata }, size: o.body.length } satisfies Blob;
    },

    async getBody(key) {
      return (await store.get(key))?.body ?? null;
    },

    async head(key) {
      await request("head", key);
      const o = objects.get(key);
      if (!o)
        throw new StoreError(`memory head of ${describe(key)} failed: no such object (NotFound)`, { transient: false });
      return { metadata: { ...o.metadata }, size: o.body.length };
    },

    async put(key, body, o: PutOptions) {
      await request("put", key);
      const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body);
      store.traffic.bytesIn += bytes.length;
      objects.set(key, {
        body: bytes,
        contentType: o.contentType,
        metadata: { ...o.metadata },
        lastModified: new Date(),
      });
    },

    async list(keyPrefix, startAfter) {
      await request("list", keyPrefix);
      const entries: BlobEntry[] = [];
      for (const [key, o] of objects)
        if (key.startsWith(keyPrefix) && (startAfter === undefined || key > startAfter))
          entries.push({ key, size: o.body.length, lastModified: o.lastModified });
      return entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    },

    async delete(key) {
      await request("delete", key);
      objects.delete(key);
    },

    close() {
      closed = true;
    },
  };

  async function request(operation: BlobOperation, key: string): Promise<void> {
    if (closed)
      throw new StoreError(`memory ${operation} of ${describe(key)} failed: the store was closed`, { transient: true });
    store.traffic.requests[operation]++;
    // A turn of the event loop, as a network request would take at least.
    await Promise.resolve();
    const injected = store.inject?.(operation, key);
    if (typeof injected === "number") await new Promise((resolve) => setTimeout(resolve, injected));
    else if (injected instanceof StoreError) throw injected;
    else if (injected)
      throw new StoreError(`memory ${operation} of ${describe(key)} failed: ${injected.message}`, {
        transient: true,
        cause: injected,
      });
  }

  return store;
}
