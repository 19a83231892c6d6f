/*
 * Object I/O under one store prefix, and nothing else: the protocol (what configs, markers and
 * records are, core/ and the modules beside this one) is written against this interface, so the
 * same protocol runs on S3 (s3-blob-store.ts) and in memory (memory-blob-store.ts, for tests and
 * benches). Keys are whole keys, the store's prefix included (keys travel in pings and pins as
 * such). Every failure is a StoreError that names the
 * operation, the object and the store; its `transient` says whether retrying may help. A body
 * over the store's size cap is refused (not transient) without being read whole, and every
 * request has an overall deadline, body included (store-limits.ts).
 */

export interface BlobHead {
  size: number;
  metadata: Record<string, string>;
}

export interface Blob extends BlobHead {
  body: Buffer;
}

export interface BlobEntry {
  key: string;
  size: number;
  lastModified: Date;
}

export interface PutOptions {
  contentType: string;
  metadata?: Record<string, string>;
  /**
   * The body is verified end to end by a digest in its metadata: a store that signs requests may
   * leave it out of the signature (s3-blob-store.ts), which would otherwise hash it once more.
   */
  verifiedBody?: boolean;
}

export interface BlobStore {
  readonly bucket: string;
  /** The store's prefix ("" or ending in "/"), which every key of the store starts with. */
  readonly prefix: string;
  /** The endpoint as named in error messages. */
  readonly endpoint: string;
  /** The largest body it reads: what a config assembled from chunks is held to as well. */
  readonly maxObjectBytes: number;
  /** The object, or null when there is none. */
  get(key: string): Promise<Blob | null>;
  /**
   * A small object's body (a record of a few KiB), or null when there is none: get() without the
   * metadata, by the leanest request the store has, for the records every pull reads and for
   * reading a thousand at once (the nodes' reports). The same limits and errors as get().
   */
  getBody(key: string): Promise<Buffer | null>;
  /** The object's size and metadata; a StoreError when there is none (not transient). */
  head(key: string): Promise<BlobHead>;
  put(key: string, body: string | Uint8Array, options: PutOptions): Promise<void>;
  /** Every key under `keyPrefix`, in string order, from just after `startAfter` when given. */
  list(keyPrefix: string, startAfter?: string): Promise<BlobEntry[]>;
  /** Deletes one object; deleting none is no error. */
  delete(key: string): Promise<void>;
  /** "s3://bucket/key at endpoint", for messages. */
  describe(key: string): string;
  /** Releases the client's sockets; requests in flight end. */
  close(): void;
}
