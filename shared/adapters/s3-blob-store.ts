/*
 * The blob store on S3 or any S3-compatible server. A dead store must fail a pass or a pull fast
 * (the Broker and the poll loop retry), so the SDK makes 2 attempts with short idle timeouts, and
 * every request has an overall deadline and a body cap (store-limits.ts).
 */
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { parseStoreUrl } from "../core/publish/store-url.js";
import type { BlobEntry, BlobStore, PutOptions } from "./blob-store.js";
import { TRANSIENT_NETWORK_CODES } from "./network-errors.js";
import { errorText, StoreError } from "./store-error.js";
import { createLeanGet } from "./s3-lean-get.js";
import { DEFAULT_MAX_OBJECT_BYTES, limitRequests, readBodyBytes } from "./store-limits.js";

export interface S3BlobStoreOptions {
  /** s3://bucket[/prefix] */
  url: string;
  /** Any S3-compatible endpoint; omitted means AWS S3 itself. */
  endpoint?: string;
  /** Default us-east-1. */
  region?: string;
  forcePathStyle?: boolean;
  /** Default: the standard AWS credential chain (env, shared files, web identity, IMDS...). */
  credentials?: S3ClientConfig["credentials"];
  /** Per-request connect and idle timeout (no byte for this long). Default 5000 ms. */
  timeoutMs?: number;
  /** Overall deadline of one request, body included (see store-limits.ts). Default 30000 ms. */
  deadlineMs?: number;
  /** Largest object body read; a larger one is refused unread. Default 64 MiB. */
  maxObjectBytes?: number;
}

export function createS3BlobStore(options: S3BlobStoreOptions): BlobStore {
  const { bucket, prefix } = parseStoreUrl(options.url);
  const region = options.region ?? "us-east-1";
  const timeoutMs = options.timeoutMs ?? 5000;
  const maxObjectBytes = options.maxObjectBytes ?? DEFAULT_MAX_OBJECT_BYTES;
  const endpoint = options.endpoint ?? `AWS S3 (${region})`;
  const client = new S3Client({
    region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials: options.credentials,
    maxAttempts: 2,
    requestHandler: { connectionTimeout: timeoutMs, requestTimeout: timeoutMs, throwOnRequestTimeout: true },
    // Newer SDKs add CRC checksums by default, which several S3-compatible servers reject;
    // the config's own digest is verified end to end anyway.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const deadlineMs = options.deadlineMs ?? 30_000;
  limitRequests(client, { deadlineMs, maxObjectBytes });

  const describe = (key: string) => `s3://${bucket}/${key} at ${endpoint}`;

  /** One S3 call; its failure becomes a StoreError that names the operation, the object and the store. */
  async function call<T>(operation: string, key: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw new StoreError(`S3 ${operation} of s3://${bucket}/${key} at ${endpoint} failed: ${errorText(error)}`, {
        transient: isTransient(error),
        cause: error,
      });
    }
  }

  /**
   * A body verified by its digest goes unsigned (SigV4's UNSIGNED-PAYLOAD): the digest in its
   * signed metadata is what every reader verifies it by, so signing it as well would hash the
   * whole config again on every publish (8.5 MB at 10,000 Services) and catch nothing the digest
   * does not. A PUT refused with a 400, 403 or 501 is sent again signed; when that one is taken,
   * the store is one that refuses unsigned payloads, and gets signed ones from then on. (A refusal
   * for another reason, say a policy that denies the PUT, fails signed too and changes nothing.)
   */
  let signBodies = false;
  async function putObject(key: string, body: string | Uint8Array, o: PutOptions): Promise<void> {
    const put = (unsigned: boolean) => {
      const command = new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: body,
        ContentType: o.contentType,
        Metadata: o.metadata,
      });
      if (unsigned) command.middlewareStack.add(unsignedPayload, { step: "build", name: "servicelbUnsignedPayload" });
      return client.send(command);
    };
    if (!o.verifiedBody || signBodies) return void (await put(false));
    try {
      return void (await put(true));
    } catch (err) {
      if (!REFUSED_UNSIGNED.has(httpStatus(err))) throw err;
    }
    await put(false);
    signBodies = true;
  }

  async function get(key: string) {
    try {
      return await call("get", key, async () => {
        const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        const body = await readBodyBytes(response.Body, maxObjectBytes);
        return { body, metadata: response.Metadata ?? {}, size: response.ContentLength ?? body.length };
      });
    } catch (err) {
      if (err instanceof StoreError && isNotFound(err.cause)) return null;
      throw err;
    }
  }

  const lean = createLeanGet({
    client,
    bucket,
    region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    timeoutMs,
    deadlineMs,
    maxObjectBytes,
    maxSockets: LEAN_SOCKETS,
    describe,
    fallback: async (key) => (await get(key))?.body ?? null,
  });

  return {
    bucket,
    prefix,
    endpoint,
    maxObjectBytes,
    describe,
    get,
    getBody: (key) => lean.get(key),

    async head(key) {
      const response = await call("head", key, () => client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
      return { metadata: response.Metadata ?? {}, size: response.ContentLength ?? 0 };
    },

    put: (key, body, o) => call("put", key, () => putObject(key, body, o)),

    async list(keyPrefix, startAfter) {
      const entries: BlobEntry[] = [];
      let token: string | undefined;
      do {
        const page = await call("list", keyPrefix, () =>
          client.send(
            new ListObjectsV2Command({
              Bucket: bucket,
              Prefix: keyPrefix,
              ContinuationToken: token,
              StartAfter: token ? undefined : startAfter,
            }),
          ),
        );
        for (const o of page.Contents ?? [])
          if (o.Key) entries.push({ key: o.Key, size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) });
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return entries;
    },

    async delete(key) {
      await call("delete", key, () => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })));
    },

    close() {
      client.destroy();
      lean.close();
    },
  };
}

/** Sockets of the lean GETs (s3-lean-get.ts): as many as the node records read at once (store-records.ts). */
const LEAN_SOCKETS = 128;

function isNotFound(error: unknown): boolean {
  const { name, $metadata } = (error ?? {}) as { name?: unknown; $metadata?: { httpStatusCode?: number } };
  return name === "NoSuchKey" || name === "NotFound" || $metadata?.httpStatusCode === 404;
}

const TRANSIENT_NAMES = new Set([
  "TimeoutError",
  "RequestTimeout",
  "SlowDown",
  "ThrottlingException",
  "ServiceUnavailable",
]);

/** What a store that does not take UNSIGNED-PAYLOAD answers it with: bad request, bad signature, not implemented. */
const REFUSED_UNSIGNED = new Set([400, 403, 501]);

const httpStatus = (error: unknown): number =>
  (error as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode ?? 0;

/** Build-step middleware: the signer, which runs later, takes a payload hash already in the headers as it is. */
const unsignedPayload =
  <I, O>(next: (args: { input: I; request: unknown }) => Promise<O>) =>
  (args: { input: I; request: unknown }): Promise<O> => {
    const headers = (args.request as { headers?: Record<string, string> }).headers;
    if (headers) headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD";
    return next(args);
  };

function isTransient(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { code, name, $metadata, $retryable } = error as {
    code?: unknown;
    name?: unknown;
    $metadata?: { httpStatusCode?: number };
    $retryable?: unknown;
  };
  const status = $metadata?.httpStatusCode ?? 0;
  return (
    TRANSIENT_NETWORK_CODES.has(String(code)) ||
    TRANSIENT_NAMES.has(String(name)) ||
    status >= 500 ||
    status === 429 ||
    status === 408 ||
    Boolean($retryable)
  );
}
