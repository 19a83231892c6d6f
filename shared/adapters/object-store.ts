import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
  type _Object,
} from "@aws-sdk/client-s3";
import { DNS1123_SUBDOMAIN } from "../core/k8s-names.js";
import { sha256 } from "../core/sha256.js";
import { parseStoreUrl } from "../core/store-url.js";
import { TRANSIENT_NETWORK_CODES } from "./network-errors.js";
import { DEFAULT_MAX_OBJECT_BYTES, limitRequests, readBodyText } from "./store-limits.js";

/*
 * Published configs live at <prefix>configs/<revision, 20 digits>-<sha256, 16 hex>.cfg.
 *
 * Keys are never overwritten and sort in snapshot order, so "the newest config" is simply
 * the greatest key. That is what keeps invariant 1 (no stale write wins) without
 * conditional writes, which S3-compatible stores (and our test server) may lack:
 * publish() refuses to write below the newest key it sees, and when two publishers race
 * (both list, then both write) both objects land, but every reader (latest, history,
 * the agent's "newer key wins") picks the greater key, i.e. the newer snapshot,
 * whichever write finished last.
 *
 * What keys cannot cover: an "unchanged" publish writes nothing (invariant 2), so the store
 * never learns of the newer snapshot; a publish from a snapshot between the newest stored
 * revision and that one would then become newest, until the next reconcile publishes again.
 * The reconcile function closes this by never overlapping passes (one instance, one pass at a
 * time: shared/app/reconcile.ts and infra/base/functions.yaml).
 */

const CONFIGS = "configs/";
const STATUS = "status/";
/** Kubernetes resourceVersions are etcd revisions (int64): at most 19 digits. */
const REVISION_DIGITS = 20;
const KEY_SHA_CHARS = 16;
const CONFIG_KEY = new RegExp(`^(\\d{${REVISION_DIGITS}})-([0-9a-f]{${KEY_SHA_CHARS}})\\.cfg$`);
const DELETE_BATCH = 10;

export class StoreError extends Error {
  override readonly name = "StoreError";
  /** True when retrying later may succeed: store unreachable, timed out, 5xx or throttled. */
  readonly transient: boolean;

  constructor(message: string, options: { transient: boolean; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.transient = options.transient;
  }
}

export interface ObjectStoreOptions {
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
  /** How many configs publish() keeps. Default 50. */
  retain?: number;
}

export interface ConfigRef {
  key: string;
  /** Full hex sha256 of the config body. */
  sha256: string;
  /** Decimal snapshot revision, without leading zeros. */
  revision: string;
}

export interface ConfigHead extends ConfigRef {
  generator: string;
}

export interface StoredConfig extends ConfigRef {
  config: string;
}

export interface PublishInput {
  /** The config body; the renderer's bytes go out as they are, text is sent as UTF-8. */
  config: string | Uint8Array;
  /** The snapshot's revision: the highest metadata.resourceVersion of the list responses. */
  revision: string;
  /** Version string of the software that rendered the config. */
  generator: string;
}

export interface PublishResult {
  /**
   * published: written. unchanged: identical to the newest config, nothing written.
   * stale: a newer snapshot is already published, nothing written.
   */
  status: "published" | "unchanged" | "stale";
  /** Where this config lives: the written key, the identical newest key, or (stale) the key it would have had. */
  key: string;
  sha256: string;
  /** The newest config as far as this publish knows. */
  newest: ConfigRef;
  /** Retention ran after the write and failed; the publish itself succeeded. */
  pruneError?: StoreError;
}

export interface HistoryEntry {
  key: string;
  revision: string;
  sha256Prefix: string;
  size: number;
  lastModified: Date;
}

export interface ObjectStore {
  readonly bucket: string;
  readonly prefix: string;
  /** The endpoint as named in error messages. */
  readonly endpoint: string;
  publish(input: PublishInput): Promise<PublishResult>;
  latest(): Promise<ConfigHead | null>;
  /** Fetches a config and verifies its body against its metadata and key. */
  get(key: string): Promise<StoredConfig>;
  /** Newest first. */
  history(options?: { limit?: number }): Promise<HistoryEntry[]>;
  /** Deletes all but the newest `keep` configs (keep >= 1); returns the deleted keys. */
  prune(options: { keep: number }): Promise<string[]>;
  putStatus(node: string, status: unknown): Promise<void>;
  listStatuses(): Promise<unknown[]>;
  /** Releases the client's sockets. */
  close(): void;
}

interface ConfigEntry {
  key: string;
  revision: bigint;
  shaPrefix: string;
  size: number;
  lastModified: Date;
}

export function createObjectStore(options: ObjectStoreOptions): ObjectStore {
  const { bucket, prefix } = parseStoreUrl(options.url);
  const region = options.region ?? "us-east-1";
  const timeoutMs = options.timeoutMs ?? 5000;
  const maxObjectBytes = options.maxObjectBytes ?? DEFAULT_MAX_OBJECT_BYTES;
  const retain = options.retain ?? 50;
  assertKeep(retain, "retain");
  const endpoint = options.endpoint ?? `AWS S3 (${region})`;
  const configsPrefix = `${prefix}${CONFIGS}`;
  const statusPrefix = `${prefix}${STATUS}`;

  const client = new S3Client({
    region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials: options.credentials,
    // A dead store must fail the invocation fast (the Broker and the poll loop retry),
    // not hang it for the SDK's default 3 attempts with no timeout.
    maxAttempts: 2,
    requestHandler: { connectionTimeout: timeoutMs, requestTimeout: timeoutMs, throwOnRequestTimeout: true },
    // Newer SDKs add CRC checksums by default, which several S3-compatible servers reject;
    // the config's own sha256 is verified end to end anyway.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  limitRequests(client, { deadlineMs: options.deadlineMs ?? 30_000, maxObjectBytes });

  async function send<T>(operation: string, key: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw new StoreError(
        `S3 ${operation} of s3://${bucket}/${key} at ${endpoint} failed: ${describe(error)}`,
        { transient: isTransient(error), cause: error },
      );
    }
  }

  function corrupt(key: string, problem: string): StoreError {
    return new StoreError(`config s3://${bucket}/${key} at ${endpoint} is corrupt: ${problem}`, {
      transient: false,
    });
  }

  async function listObjects(listPrefix: string, startAfter?: string): Promise<_Object[]> {
    const objects: _Object[] = [];
    let token: string | undefined;
    do {
      const page = await send("list", listPrefix, () =>
        client.send(
          new ListObjectsV2Command({
            Bucket: bucket,
            Prefix: listPrefix,
            ContinuationToken: token,
            StartAfter: token ? undefined : startAfter,
          }),
        ),
      );
      objects.push(...(page.Contents ?? []));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return objects;
  }

  /** Config entries in ascending key order, i.e. oldest snapshot first. Foreign objects are ignored. */
  async function listConfigs(startAfter?: string): Promise<ConfigEntry[]> {
    const entries: ConfigEntry[] = [];
    for (const object of await listObjects(configsPrefix, startAfter)) {
      const parsed = parseConfigKey(object.Key ?? "");
      if (parsed) {
        entries.push({ key: object.Key!, ...parsed, size: object.Size ?? 0, lastModified: object.LastModified ?? new Date(0) });
      }
    }
    // S3 lists in key order, but not every S3-compatible store promises it.
    return entries.sort((a, b) => compareKeys(a.key, b.key));
  }

  function parseConfigKey(key: string): { revision: bigint; shaPrefix: string } | null {
    if (!key.startsWith(configsPrefix)) return null;
    const match = CONFIG_KEY.exec(key.slice(configsPrefix.length));
    return match ? { revision: BigInt(match[1]!), shaPrefix: match[2]! } : null;
  }

  function requireConfigKey(key: string): { revision: bigint; shaPrefix: string } {
    const parsed = parseConfigKey(key);
    if (!parsed) {
      throw new Error(`${JSON.stringify(key)} is not a config key of s3://${bucket}/${prefix} (expected ${configsPrefix}<20-digit revision>-<16 hex>.cfg)`);
    }
    return parsed;
  }

  /** The metadata sha256 of a config, checked against the key it is stored under. */
  function metadataSha(key: string, shaPrefix: string, metadata: Record<string, string> | undefined): string {
    const sha = metadata?.sha256;
    if (!sha) throw corrupt(key, "no sha256 metadata");
    if (!sha.startsWith(shaPrefix)) throw corrupt(key, `metadata sha256 ${sha} does not match the key's sha256 prefix ${shaPrefix}`);
    return sha;
  }

  async function head(entry: ConfigEntry): Promise<ConfigHead> {
    const response = await send("head", entry.key, () =>
      client.send(new HeadObjectCommand({ Bucket: bucket, Key: entry.key })),
    );
    return {
      key: entry.key,
      sha256: metadataSha(entry.key, entry.shaPrefix, response.Metadata),
      revision: entry.revision.toString(),
      generator: response.Metadata?.generator ?? "",
    };
  }

  async function get(key: string): Promise<StoredConfig> {
    const { revision, shaPrefix } = requireConfigKey(key);
    const { config, metadata } = await send("get", key, async () => {
      const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return { config: await readBodyText(response.Body, maxObjectBytes), metadata: response.Metadata };
    });
    const expected = metadataSha(key, shaPrefix, metadata);
    const actual = sha256(config);
    if (actual !== expected) throw corrupt(key, `body sha256 ${actual} but metadata sha256 ${expected}`);
    return { key, config, sha256: actual, revision: revision.toString() };
  }

  async function deleteKeys(keys: string[]): Promise<void> {
    // One DeleteObject per key: DeleteObjects is missing from some S3-compatible stores.
    // Oldest first, so a failure part-way leaves the newer history in place.
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      await Promise.all(
        keys.slice(i, i + DELETE_BATCH).map((key) =>
          send("delete", key, () => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }))),
        ),
      );
    }
  }

  async function prune({ keep }: { keep: number }): Promise<string[]> {
    assertKeep(keep, "keep");
    const doomed = (await listConfigs()).slice(0, -keep).map((entry) => entry.key);
    await deleteKeys(doomed);
    return doomed;
  }

  async function publish({ config, revision, generator }: PublishInput): Promise<PublishResult> {
    const ours = normalizeRevision(revision);
    if (!/^[\x20-\x7e]*$/.test(generator)) {
      throw new Error(`generator must be printable ASCII (it is sent as an HTTP header), got ${JSON.stringify(generator)}`);
    }
    const sha = sha256(config);
    const key = `${configsPrefix}${ours.toString().padStart(REVISION_DIGITS, "0")}-${sha.slice(0, KEY_SHA_CHARS)}.cfg`;
    const ref: ConfigRef = { key, sha256: sha, revision: ours.toString() };

    let newest = ref;
    const configs = await listConfigs();
    const newestEntry = configs.at(-1);
    if (newestEntry) {
      // Decided from the key alone (revision and 64 bits of sha256): an object without our
      // metadata, say one an operator uploaded by hand, must not stop every future publish.
      const storedRef = async (): Promise<ConfigRef> => ({
        key: newestEntry.key,
        // Only reported: a newest object without metadata reports its key's sha256 prefix.
        sha256: await head(newestEntry).then((h) => h.sha256, () => newestEntry.shaPrefix),
        revision: newestEntry.revision.toString(),
      });
      if (newestEntry.shaPrefix === sha.slice(0, KEY_SHA_CHARS)) return { status: "unchanged", key: newestEntry.key, sha256: sha, newest: { key: newestEntry.key, sha256: sha, revision: newestEntry.revision.toString() } };
      if (newestEntry.revision > ours) return { status: "stale", key, sha256: sha, newest: await storedRef() };
      // Equal revisions with different bodies: one snapshot rendered by different options or
      // generator versions. Both are written; the greater sha sorts last and wins, which is
      // arbitrary but harmless since both describe the same cluster state.
      if (compareKeys(newestEntry.key, key) > 0) newest = await storedRef();
    }

    await send("put", key, () =>
      client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: config,
          ContentType: "text/plain; charset=utf-8",
          Metadata: { sha256: sha, revision: ref.revision, generator },
        }),
      ),
    );

    // A failed clean-up must not turn a successful publish into an error the caller retries.
    try {
      // The listing above already says whether anything is past retention: no second list otherwise.
      if (configs.length + 1 > retain) await prune({ keep: retain });
      return { status: "published", key, sha256: sha, newest };
    } catch (error) {
      if (!(error instanceof StoreError)) throw error;
      return { status: "published", key, sha256: sha, newest, pruneError: error };
    }
  }

  return {
    bucket,
    prefix,
    endpoint,
    publish,
    get,
    prune,

    async latest() {
      const newest = (await listConfigs()).at(-1);
      return newest ? head(newest) : null;
    },


    async history({ limit } = {}) {
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) {
        throw new Error(`history limit must be an integer >= 0, got ${limit}`);
      }
      const entries = (await listConfigs()).reverse();
      return entries.slice(0, limit ?? entries.length).map((entry) => ({
        key: entry.key,
        revision: entry.revision.toString(),
        sha256Prefix: entry.shaPrefix,
        size: entry.size,
        lastModified: entry.lastModified,
      }));
    },

    async putStatus(node, status) {
      assertNodeName(node);
      const key = `${statusPrefix}${node}.json`;
      await send("put", key, () =>
        client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key,
            Body: JSON.stringify(status),
            ContentType: "application/json",
          }),
        ),
      );
    },

    async listStatuses() {
      const keys = (await listObjects(statusPrefix))
        .map((object) => object.Key ?? "")
        .filter((key) => key.endsWith(".json") && isNodeName(key.slice(statusPrefix.length, -".json".length)));
      return Promise.all(
        keys.map(async (key) => {
          const text = await send("get", key, async () => {
            const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
            return readBodyText(response.Body, maxObjectBytes);
          });
          try {
            return JSON.parse(text) as unknown;
          } catch (error) {
            throw new StoreError(`status s3://${bucket}/${key} at ${endpoint} is not JSON: ${describe(error)}`, {
              transient: false,
              cause: error,
            });
          }
        }),
      );
    },

    close() {
      client.destroy();
    },
  };
}

/** Parses a Kubernetes resourceVersion; it must be decimal to order snapshots. */
function normalizeRevision(revision: string): bigint {
  if (!/^\d+$/.test(revision)) {
    throw new Error(`snapshot revision must be a decimal resourceVersion, got ${JSON.stringify(revision)}`);
  }
  const value = BigInt(revision);
  if (value.toString().length > REVISION_DIGITS) {
    throw new Error(`snapshot revision ${revision} has more than ${REVISION_DIGITS} digits`);
  }
  return value;
}

function assertKeep(keep: number, name: string): void {
  if (!Number.isInteger(keep) || keep < 1) {
    throw new Error(`${name} must be an integer >= 1 (the newest config is never deleted), got ${keep}`);
  }
}

function isNodeName(node: string): boolean {
  return node.length <= 253 && DNS1123_SUBDOMAIN.test(node);
}

function assertNodeName(node: string): void {
  if (!isNodeName(node)) {
    throw new Error(`node name must be a DNS-1123 subdomain (lowercase a-z, 0-9, '-', '.'), got ${JSON.stringify(node)}`);
  }
}

/** Plain code-unit order, the order S3 lists keys in; localeCompare would not be. */
function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const TRANSIENT_NAMES = new Set(["TimeoutError", "RequestTimeout", "SlowDown", "ThrottlingException", "ServiceUnavailable"]);

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

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const details = [typeof code === "string" ? code : error.name, status ? `HTTP ${status}` : ""].filter(Boolean).join(", ");
  return error.message ? `${error.message} (${details})` : details;
}
