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
import { isAscii, isUtf8 } from "node:buffer";
import { z } from "zod";
import {
  compareConfigNames,
  compareMarks,
  formatConfigName,
  formatViewName,
  KEY_SHA_CHARS,
  parseConfigName,
  parseViewName,
  type ConfigName,
  type Mark,
} from "../core/config-key.js";
import { DNS1123_SUBDOMAIN } from "../core/k8s-names.js";
import { judgeKeys } from "../core/key-trust.js";
import { decidePublish, nextSeq, pickView, storeMark } from "../core/publish-order.js";
import type { ConfigChunks } from "../core/chunks.js";
import { parseRevision } from "../core/revision.js";
import { settingsDigest, settingsRecordSchema, type SettingsRecord } from "../core/settings-record.js";
import { type BackendLayout, backendLayoutSchema, layoutDigest } from "../core/backend-layout.js";
import { SHA256_HEX } from "../core/sha256.js";
import {
  configDigest,
  configHasher,
  digestHex,
  digestKind,
  type DigestKind,
  digestSchema,
  SuccessiveDigests,
} from "../core/config-digest.js";
import { parseStoreUrl } from "../core/store-url.js";
import { TRANSIENT_NETWORK_CODES } from "./network-errors.js";
import { DEFAULT_MAX_OBJECT_BYTES, limitRequests, readBodyBytes, readBodyText } from "./store-limits.js";

/*
 * Published configs live at <prefix>configs/<epoch>-<revision>-<seq>-<sha>.cfg (see
 * core/config-key.ts for the fields and their order, core/publish-order.ts for what a publish
 * writes). Keys are never overwritten, and "the newest config" is the greatest key in decision
 * order that is trusted by name (core/key-trust.ts: it leads the key before it by a bounded step)
 * and whose object verifies: a key alone is never trusted (anyone with write access can make
 * one), so a far-ahead, missing, mis-shaped or unverifiable newest key is skipped and reported,
 * never a reason to stop publishing. Beside the configs:
 *   views/<epoch>-<revision>   a pass that found nothing to change saw this view (no config)
 *   settings/<digest>.json     the settings a config was rendered with (content-addressed)
 *   layouts/<digest>.json      which backend serves which Service port in a config (content-addressed)
 *   pin.json                   the config every agent runs until unpinned
 *   reconcile.json             the reconcile function's last pass, and its failures in a row
 *   status/<node>.json         what each agent runs
 * Nothing depends on conditional writes, which S3-compatible stores (and our test server) may
 * lack: two publishers racing both write, and every reader picks the greater key.
 */

const CONFIGS = "configs/";
const VIEWS = "views/";
const SETTINGS = "settings/";
const LAYOUTS = "layouts/";
const STATUS = "status/";
const PIN = "pin.json";
const PASS_RECORD = "reconcile.json";
const DELETE_BATCH = 10;
/** View markers kept: only the newest counts; a few more cover a racing pass's delete. */
const VIEWS_KEPT = 5;
/**
 * Bodies a publish reads, at most, before it takes a config ahead of the live cluster as a
 * regression (see publish): each that does not verify is skipped, and the rest cost one epoch.
 */
const BODIES_CHECKED = 4;

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
  /** How many configs prune() keeps by default (publish() says when that is exceeded). Default 50. */
  retain?: number;
}

export interface ConfigRef {
  key: string;
  /** The config body's digest (core/config-digest.ts): 64 hex digits of its sha256, or tree1:<hex>. */
  sha256: string;
  /** Decimal snapshot revision, without leading zeros. */
  revision: string;
}

/** A config's metadata, verified against its key. */
export interface ConfigHead extends ConfigRef {
  /** The software that rendered it ("producer"), e.g. servicelb/0.1.0. */
  generator: string;
  epoch: number;
  seq: number;
  /** Digest of the settings it was rendered with (settings/<digest>.json); null when not recorded. */
  settingsDigest: string | null;
  /** Digest of its backend layout (layouts/<digest>.json); null when not recorded. */
  layoutDigest: string | null;
}

export interface StoredConfig extends ConfigRef {
  config: string;
}

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
  /** Why the key may not be followed (core/key-trust.ts): publishers, agents and `status` skip it. */
  untrusted?: string;
}

export const pinSchema = z.object({
  key: z.string().min(1),
  sha256: digestSchema,
  pinnedAt: z.string(),
  reason: z.string().optional(),
});

/** pin.json: every agent runs this config until it is removed. */
export type Pin = z.infer<typeof pinSchema>;

export const passRecordSchema = z.object({
  /** When the pass ended. */
  at: z.string(),
  /** The function that ran it ("producer"), e.g. servicelb/0.1.0. */
  generator: z.string(),
  /** Null when the pass succeeded; else the failures in a row one instance saw, the last described. */
  failure: z
    .object({
      since: z.string(),
      passes: z.number().int().min(1),
      stage: z.string(),
      message: z.string(),
      /** Retrying later may succeed (store or API server unreachable, a deadline). */
      transient: z.boolean(),
      eventId: z.string(),
    })
    .nullable(),
});

/** reconcile.json: how the reconcile function's last recorded pass went. */
export type PassRecord = z.infer<typeof passRecordSchema>;

export interface ObjectStore {
  readonly bucket: string;
  readonly prefix: string;
  /** The endpoint as named in error messages. */
  readonly endpoint: string;
  publish(input: PublishInput): Promise<PublishResult>;
  /** The newest trusted config that verifies, and the newer keys skipped on the way. */
  newest(): Promise<{ config: ConfigHead | null; skipped: SkippedKey[] }>;
  /** The newest config that verifies. */
  latest(): Promise<ConfigHead | null>;
  /** A config's metadata, verified against its key (a StoreError, not transient, when it does not verify). */
  head(key: string): Promise<ConfigHead>;
  /** Fetches a config and verifies its body against its metadata and key. */
  get(key: string): Promise<StoredConfig>;
  /** Newest first, in decision order; keys only (see head()), each judged by name (`untrusted`). */
  history(options?: { limit?: number }): Promise<HistoryEntry[]>;
  /**
   * Deletes every config older than the newest `keep` trusted ones (keep >= 1; default: the
   * store's retention), never the pinned one; returns the deleted keys.
   */
  prune(options?: { keep?: number }): Promise<string[]>;
  readSettings(digest: string): Promise<SettingsRecord>;
  readLayout(digest: string): Promise<BackendLayout>;
  /** The pin, or null; a StoreError (not transient) when pin.json is not a pin. */
  getPin(): Promise<Pin | null>;
  putPin(pin: Pin): Promise<void>;
  deletePin(): Promise<void>;
  /** The reconcile function's record of its last pass, or null; a StoreError (not transient) when it is not one. */
  getPassRecord(): Promise<PassRecord | null>;
  putPassRecord(record: PassRecord): Promise<void>;
  putStatus(node: string, status: unknown): Promise<void>;
  listStatuses(): Promise<unknown[]>;
  /** Releases the client's sockets. */
  close(): void;
}

interface ConfigEntry {
  key: string;
  name: ConfigName;
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
  const viewsPrefix = `${prefix}${VIEWS}`;
  const settingsPrefix = `${prefix}${SETTINGS}`;
  const layoutPrefix = `${prefix}${LAYOUTS}`;
  const statusPrefix = `${prefix}${STATUS}`;
  const pinKey = `${prefix}${PIN}`;
  const passRecordKey = `${prefix}${PASS_RECORD}`;

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
    // the config's own digest is verified end to end anyway.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  limitRequests(client, { deadlineMs: options.deadlineMs ?? 30_000, maxObjectBytes });

  /** One S3 call; its failure becomes a StoreError that names the operation, the object and the store. */
  async function storeCall<T>(operation: string, key: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw new StoreError(`S3 ${operation} of s3://${bucket}/${key} at ${endpoint} failed: ${errorText(error)}`, {
        transient: isTransient(error),
        cause: error,
      });
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
      const page = await storeCall("list", listPrefix, () =>
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

  /** Config entries in decision order, oldest first. Foreign objects are ignored. */
  async function listConfigs(startAfter?: string): Promise<ConfigEntry[]> {
    const entries: ConfigEntry[] = [];
    for (const object of await listObjects(configsPrefix, startAfter)) {
      const name = parseConfigKey(object.Key ?? "");
      if (name)
        entries.push({
          key: object.Key!,
          name,
          size: object.Size ?? 0,
          lastModified: object.LastModified ?? new Date(0),
        });
    }
    // Not S3's listing order: names of the first key format sort differently as strings.
    return entries.sort((a, b) => compareConfigNames(a.name, b.name));
  }

  async function listViews(): Promise<Array<{ key: string; mark: Mark }>> {
    const views: Array<{ key: string; mark: Mark }> = [];
    for (const object of await listObjects(viewsPrefix)) {
      const mark = parseViewName((object.Key ?? "").slice(viewsPrefix.length));
      if (mark) views.push({ key: object.Key!, mark });
    }
    return views.sort((a, b) => compareMarks(a.mark, b.mark));
  }

  function parseConfigKey(key: string): ConfigName | null {
    return key.startsWith(configsPrefix) ? parseConfigName(key.slice(configsPrefix.length)) : null;
  }

  function requireConfigKey(key: string): ConfigName {
    const name = parseConfigKey(key);
    if (!name) {
      throw new Error(
        `${JSON.stringify(key)} is not a config key of s3://${bucket}/${prefix} (expected ${configsPrefix}<epoch>-<revision>-<seq>-<sha>.cfg)`,
      );
    }
    return name;
  }

  /** The metadata of a config, checked against the key it is stored under. */
  function verifyMetadata(
    key: string,
    name: ConfigName,
    metadata: Record<string, string> | undefined,
    size: number | undefined,
  ): ConfigHead {
    // A tree1 config's digest is under `digest`, so that an agent that knows only sha256 skips it
    // for want of a sha256 rather than read one it cannot match.
    const sha = metadata?.digest ?? metadata?.sha256;
    if (!metadata || !sha) throw corrupt(key, "no sha256 or digest metadata");
    const shaped = metadata.digest !== undefined ? TREE1_DIGEST.test(sha) : SHA256_HEX.test(sha);
    if (!shaped || !digestHex(sha).startsWith(name.shaPrefix))
      throw corrupt(key, `metadata digest ${sha} does not match the key's digest prefix ${name.shaPrefix}`);
    const revision = name.revision.toString();
    if (metadata.revision !== revision)
      throw corrupt(key, `metadata revision ${metadata.revision ?? "(none)"} but the key says ${revision}`);
    if (!name.legacy && (metadata.epoch !== String(name.epoch) || metadata.seq !== String(name.seq))) {
      throw corrupt(
        key,
        `metadata epoch/seq ${metadata.epoch ?? "(none)"}/${metadata.seq ?? "(none)"} but the key says ${name.epoch}/${name.seq}`,
      );
    }
    if (metadata.bytes !== undefined && size !== undefined && Number(metadata.bytes) !== size)
      throw corrupt(key, `${size} bytes but the metadata says ${metadata.bytes}`);
    const digest = metadata.settings;
    const layout = metadata.layout;
    return {
      key,
      sha256: sha,
      revision,
      generator: metadata.generator ?? "",
      epoch: name.epoch,
      seq: name.seq,
      settingsDigest: digest && SETTINGS_DIGEST.test(digest) ? digest : null,
      layoutDigest: layout && SETTINGS_DIGEST.test(layout) ? layout : null,
    };
  }

  async function headConfig(key: string, name: ConfigName): Promise<ConfigHead> {
    const response = await storeCall("head", key, () =>
      client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })),
    );
    return verifyMetadata(key, name, response.Metadata, response.ContentLength);
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
        const head = verified.get(entry.key) ?? (await headConfig(entry.key, entry.name));
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

  /** An agent GETs one config after another, each mostly the one before: tree1 verifies from what the last left. */
  const digests = new SuccessiveDigests();

  async function get(key: string): Promise<StoredConfig> {
    const name = requireConfigKey(key);
    const { body, metadata, size } = await storeCall("get", key, async () => {
      const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return {
        body: await readBodyBytes(response.Body, maxObjectBytes),
        metadata: response.Metadata,
        size: response.ContentLength,
      };
    });
    const head = verifyMetadata(key, name, metadata, size);
    const kind = digestKind(head.sha256);
    const actual = digests.digest(kind, body);
    if (actual !== head.sha256)
      throw corrupt(
        key,
        `the body's ${kind} digest is ${digestHex(actual)} but the metadata says ${digestHex(head.sha256)}`,
      );
    // The bytes verified are the bytes applied: text that is not UTF-8 would be changed by decoding.
    if (!isUtf8(body)) throw corrupt(key, "the body is not UTF-8 text");
    // A config is ASCII but for what annotations may bring: one byte per character, decoded as such.
    const config = body.toString(isAscii(body) ? "latin1" : "utf8");
    return { key, config, sha256: actual, revision: head.revision };
  }

  async function getText(key: string): Promise<string | null> {
    try {
      return await storeCall("get", key, async () => {
        const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        return readBodyText(response.Body, maxObjectBytes);
      });
    } catch (err) {
      if (err instanceof StoreError && isNotFound(err.cause)) return null;
      throw err;
    }
  }

  async function putJson(key: string, value: unknown): Promise<void> {
    await storeCall("put", key, () =>
      client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: JSON.stringify(value),
          ContentType: "application/json",
        }),
      ),
    );
  }

  async function deleteKeys(keys: string[]): Promise<void> {
    // One DeleteObject per key: DeleteObjects is missing from some S3-compatible stores.
    // Oldest first, so a failure part-way leaves the newer history in place.
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      await Promise.all(
        keys
          .slice(i, i + DELETE_BATCH)
          .map((key) =>
            storeCall("delete", key, () => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }))),
          ),
      );
    }
  }

  /**
   * A content-addressed record beside the configs (settings/, layouts/): read, parsed and checked
   * against the digest it is stored under.
   */
  async function readRecord<T>(
    digest: string,
    record: { what: string; prefix: string; schema: z.ZodType<T>; digestOf: (value: T) => string },
  ): Promise<T> {
    const { what, prefix: at, schema, digestOf } = record;
    if (!SETTINGS_DIGEST.test(digest))
      throw new Error(`${what} digest must be 16 hex digits, got ${JSON.stringify(digest)}`);
    const key = `${at}${digest}.json`;
    const text = await getText(key);
    if (text === null)
      throw new StoreError(`${what} s3://${bucket}/${key} at ${endpoint} does not exist`, { transient: false });
    const parsed = (() => {
      try {
        return schema.safeParse(JSON.parse(text));
      } catch {
        return null;
      }
    })();
    if (!parsed?.success || digestOf(parsed.data) !== digest)
      throw new StoreError(`${what} s3://${bucket}/${key} at ${endpoint} is corrupt`, { transient: false });
    return parsed.data;
  }

  async function getPin(): Promise<Pin | null> {
    const text = await getText(pinKey);
    if (text === null) return null;
    let parsed: ReturnType<typeof pinSchema.safeParse>;
    try {
      parsed = pinSchema.safeParse(JSON.parse(text));
    } catch (error) {
      throw new StoreError(`pin s3://${bucket}/${pinKey} at ${endpoint} is not JSON: ${errorText(error)}`, {
        transient: false,
      });
    }
    if (!parsed.success)
      throw new StoreError(
        `pin s3://${bucket}/${pinKey} at ${endpoint} is not a pin: ${parsed.error.issues.map((i) => i.message).join("; ")}`,
        { transient: false },
      );
    return parsed.data;
  }

  async function prune({ keep = retain }: { keep?: number } = {}): Promise<string[]> {
    assertKeep(keep, "keep");
    const pinned = await getPin().catch(() => null);
    const configs = await listConfigs();
    // Counted in trusted keys: far-ahead keys, which sort newest, must not push the history out.
    const verdicts = judgeKeys(configs.map((e) => e.name));
    const trusted = configs.filter((_, i) => verdicts[i] === null);
    const oldestKept = trusted.length > keep ? trusted[trusted.length - keep]!.name : null;
    const older = oldestKept ? configs.filter((e) => compareConfigNames(e.name, oldestKept) < 0) : [];
    const doomed = older.map((entry) => entry.key).filter((key) => key !== pinned?.key);
    await deleteKeys(doomed);
    knownCount = configs.length - doomed.length;
    await pruneLayouts(configs.slice(older.length));
    return doomed;
  }

  /**
   * Only a cold function instance reads a layout, and only the newest config's: older records
   * (one per Service added or removed) are deleted. One that a racing publish wrote a moment ago
   * may go too; its instance holds it in memory, and another would start afresh (one reload).
   */
  async function pruneLayouts(retained: ConfigEntry[]): Promise<void> {
    const keep = (await findNewest(retained)).head?.layoutDigest;
    const doomed = (await listObjects(layoutPrefix))
      .map((o) => o.Key ?? "")
      .filter((key) => key !== "" && key !== `${layoutPrefix}${keep}.json`);
    await deleteKeys(doomed);
  }

  /**
   * A config's body goes unsigned (SigV4's UNSIGNED-PAYLOAD): the digest in its signed metadata
   * is what every agent verifies the body by, so signing it as well would hash the whole config
   * again on every publish (8.5 MB at 10,000 Services) and catch nothing the digest does not.
   * A PUT refused with a 400, 403 or 501 is sent again signed; when that one is taken, the store
   * is one that refuses unsigned payloads, and gets signed ones from then on. (A refusal for
   * another reason, say a policy that denies the PUT, fails signed too and changes nothing.)
   */
  let signBodies = false;
  async function putConfig(key: string, body: string | Uint8Array, metadata: Record<string, string>): Promise<void> {
    const put = (unsigned: boolean) => {
      const command = new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: body,
        ContentType: "text/plain; charset=utf-8",
        Metadata: metadata,
      });
      if (unsigned) command.middlewareStack.add(unsignedPayload, { step: "build", name: "servicelbUnsignedPayload" });
      return client.send(command);
    };
    if (signBodies) return void (await put(false));
    try {
      return void (await put(true));
    } catch (err) {
      if (!REFUSED_UNSIGNED.has(httpStatus(err))) throw err;
    }
    await put(false);
    signBodies = true;
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
   * judged from (core/key-trust.ts).
   */
  async function configsFromNewest(): Promise<{ configs: ConfigEntry[]; anchor?: string }> {
    const from = lastNewestKey;
    if (from !== null && verified.has(from) && parseConfigKey(from)?.legacy === false) {
      const startAfter = from.slice(0, -1);
      const after = await listConfigs(startAfter);
      if (after.some((e) => e.key === from)) {
        // A store that ignores StartAfter answers with the whole history: then that is the count.
        knownCount = after.some((e) => e.key <= startAfter) ? after.length : knownCount + after.length - 1;
        return { configs: after, anchor: from };
      }
    }
    const all = await listConfigs();
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
      `${configsPrefix}${formatConfigName({ epoch, revision: ours, seq, shaPrefix: digestHex(sha).slice(0, KEY_SHA_CHARS) })}`;
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
      await putJson(view, { generator });
      // Only the newest marker counts; a failed clean-up is retried by the next marker. Markers
      // above this one did not count (forged, or of a cluster that went back): left for the operator.
      const below = views.filter((v) => compareMarks(v.mark, mark) < 0);
      await deleteKeys(below.slice(0, -(VIEWS_KEPT - 1)).map((v) => v.key)).catch(() => undefined);
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
        const problem = await get(newestHead.key).then(
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

    const metadata: Record<string, string> = {
      [digestKind(sha) === "sha256" ? "sha256" : "digest"]: sha,
      revision: ref.revision,
      generator,
      epoch: String(decision.epoch),
      seq: String(decision.seq),
      bytes: String(typeof config === "string" ? Buffer.byteLength(config) : config.byteLength),
    };
    if (input.settings) {
      const digest = settingsDigest(input.settings);
      metadata.settings = digest;
      // Content-addressed: written when the newest config was made with other settings, else already there.
      if (newestHead?.settingsDigest !== digest) await putJson(`${settingsPrefix}${digest}.json`, input.settings);
    }
    if (input.layout) {
      const digest = layoutDigest(input.layout);
      metadata.layout = digest;
      // Changes only when a Service is added or removed: endpoint changes write no record.
      if (newestHead?.layoutDigest !== digest) await putJson(`${layoutPrefix}${digest}.json`, input.layout);
    }
    const body = isHashed(config) ? Buffer.concat(config.chunks, config.byteLength) : config;
    await storeCall("put", key, () => putConfig(key, body, metadata));
    remember({
      ...ref,
      generator,
      epoch: decision.epoch,
      seq: decision.seq,
      settingsDigest: metadata.settings ?? null,
      layoutDigest: metadata.layout ?? null,
    });
    lastNewestSha = sha;
    lastNewestKey = key;
    knownCount++;
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
    bucket,
    prefix,
    endpoint,
    publish,
    get,
    prune,
    getPin,

    async newest() {
      const { head, skipped } = await findNewest(await listConfigs());
      return { config: head, skipped };
    },

    async latest() {
      return (await findNewest(await listConfigs())).head;
    },

    head: (key) => headConfig(key, requireConfigKey(key)),

    async history({ limit } = {}) {
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) {
        throw new Error(`history limit must be an integer >= 0, got ${limit}`);
      }
      const entries = await listConfigs();
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

    readSettings: (digest) =>
      readRecord(digest, {
        what: "settings",
        prefix: settingsPrefix,
        schema: settingsRecordSchema,
        digestOf: settingsDigest,
      }),

    readLayout: (digest) =>
      readRecord(digest, { what: "layout", prefix: layoutPrefix, schema: backendLayoutSchema, digestOf: layoutDigest }),

    async putPin(pin) {
      await putJson(pinKey, pinSchema.parse(pin));
    },

    async deletePin() {
      await storeCall("delete", pinKey, () => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: pinKey })));
    },

    async getPassRecord() {
      const text = await getText(passRecordKey);
      if (text === null) return null;
      const parsed = (() => {
        try {
          return passRecordSchema.safeParse(JSON.parse(text));
        } catch {
          return null;
        }
      })();
      if (!parsed?.success)
        throw new StoreError(`s3://${bucket}/${passRecordKey} at ${endpoint} is not a record of a reconcile pass`, {
          transient: false,
        });
      return parsed.data;
    },

    async putPassRecord(record) {
      await putJson(passRecordKey, passRecordSchema.parse(record));
    },

    async putStatus(node, status) {
      assertNodeName(node);
      await putJson(`${statusPrefix}${node}.json`, status);
    },

    async listStatuses() {
      const keys = (await listObjects(statusPrefix))
        .map((object) => object.Key ?? "")
        .filter((key) => key.endsWith(".json") && isNodeName(key.slice(statusPrefix.length, -".json".length)));
      const reports = await Promise.all(
        keys.map(async (key) => {
          // A report deleted since the listing (its node went) is no report.
          const text = await getText(key);
          if (text === null) return undefined;
          try {
            return JSON.parse(text) as unknown;
          } catch (error) {
            throw new StoreError(`status s3://${bucket}/${key} at ${endpoint} is not JSON: ${errorText(error)}`, {
              transient: false,
              cause: error,
            });
          }
        }),
      );
      return reports.filter((r) => r !== undefined);
    },

    close() {
      client.destroy();
    },
  };
}

const SETTINGS_DIGEST = /^[0-9a-f]{16}$/;
const TREE1_DIGEST = /^tree1:[0-9a-f]{64}$/;
/** Verified keys a store remembers: the newest few are all a publisher looks at. */
const VERIFIED_KEPT = 8;
/** Rejected keys a store remembers: a few passes' worth of BODIES_CHECKED. */
const REJECTED_KEPT = 64;

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
    throw new Error(
      `node name must be a DNS-1123 subdomain (lowercase a-z, 0-9, '-', '.'), got ${JSON.stringify(node)}`,
    );
  }
}

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

/** An SDK error as a message says it: its text, then its code and HTTP status. */
function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const details = [typeof code === "string" ? code : error.name, status ? `HTTP ${status}` : ""]
    .filter(Boolean)
    .join(", ");
  return error.message ? `${error.message} (${details})` : details;
}

const maxRevision = (a: bigint, b: bigint): bigint => (a > b ? a : b);

function digestInKind(kind: DigestKind, config: string | Uint8Array | HashedConfig): string {
  return isHashed(config) ? configHasher(kind).digest(config.chunks) : configDigest(kind, config);
}

function isHashed(config: string | Uint8Array | HashedConfig): config is HashedConfig {
  return typeof config !== "string" && !(config instanceof Uint8Array);
}
