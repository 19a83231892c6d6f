/*
 * The small JSON records beside the configs:
 *   pin.json                   the config every agent runs until unpinned
 *   rollout.json               the canary rollout: which config each node runs (core/rollout/rollout.ts)
 *   reconcile.json             the reconcile function's last pass, and its failures in a row
 *   status/<node>.json         what each agent runs
 *   settings/<digest>.json     the settings a config was rendered with (content-addressed)
 *   layouts/<digest>.json      which backend serves which Service port in a config (content-addressed)
 * Each is read with its schema and refused, with a clear StoreError (not transient), when it is
 * not what its name says.
 */
import { z } from "zod";
import { eachAtMost } from "../core/at-most.js";
import { type BackendLayout, backendLayoutSchema, layoutDigest } from "../core/model/layout-record.js";
import { digestSchema } from "../core/publish/config-digest.js";
import { DNS1123_SUBDOMAIN } from "../core/kubernetes/k8s-names.js";
import { type RolloutRecord, rolloutRecordSchema } from "../core/rollout/rollout-record.js";
import { settingsDigest, settingsRecordSchema, type SettingsRecord } from "../core/settings/settings-record.js";
import type { BlobStore } from "./blob-store.js";
import { errorText, StoreError } from "./store-error.js";

export const SETTINGS = "settings/";
export const LAYOUTS = "layouts/";
const STATUS = "status/";
const PIN = "pin.json";
const ROLLOUT = "rollout.json";
const PASS_RECORD = "reconcile.json";
const NEWEST = "newest.json";
/** Digest of a settings or layout record: the name it is stored under. */
export const RECORD_DIGEST = /^[0-9a-f]{16}$/;

export const pinSchema = z.object({
  key: z.string().min(1),
  sha256: digestSchema,
  pinnedAt: z.string(),
  reason: z.string().optional(),
});

/** pin.json: every agent runs this config until it is removed. */
export type Pin = z.infer<typeof pinSchema>;

/**
 * newest.json: the key and digest of the newest config, written after it. A hint only, read by an
 * agent's poll to learn in one small GET that nothing changed: a key it names is still listed,
 * judged and verified before it is pulled (agent/pull-loop.ts).
 */
export const newestHintSchema = z.object({ key: z.string().max(1024), sha256: z.string().max(200) });
export type NewestHint = z.infer<typeof newestHintSchema>;

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

/** One read of status/: what was listed, what was read, and what was listed but could not be read. */
export interface StatusRead {
  /** Records listed (deleted since the listing or not). */
  listed: number;
  /** Each record read: its JSON, or its text when it is not JSON (which is then no report). */
  reports: unknown[];
  /** Records listed whose GET failed (the store's errors, timeouts): neither read nor known gone. */
  unread: { key: string; error: StoreError }[];
}

/** Node records read at once: a fleet's are a thousand small GETs. */
export const STATUS_READS = 128;
/** The wait before the records whose reads failed transiently are read again. */
const STATUS_REREAD_MS = 200;

export interface StoreRecords {
  readSettings(digest: string): Promise<SettingsRecord>;
  readLayout(digest: string): Promise<BackendLayout>;
  /** Written when not known to be there already (content-addressed: same digest, same record). */
  putSettings(record: SettingsRecord): Promise<string>;
  putLayout(layout: BackendLayout): Promise<string>;
  /** The pin, or null; a StoreError (not transient) when pin.json is not a pin. */
  getPin(): Promise<Pin | null>;
  putPin(pin: Pin): Promise<void>;
  deletePin(): Promise<void>;
  /** rollout.json, or null; a StoreError (not transient) when it is not a rollout record. */
  getRollout(): Promise<RolloutRecord | null>;
  putRollout(record: RolloutRecord): Promise<void>;
  deleteRollout(): Promise<void>;
  /** The reconcile function's record of its last pass, or null; a StoreError (not transient) when it is not one. */
  getPassRecord(): Promise<PassRecord | null>;
  putPassRecord(record: PassRecord): Promise<void>;
  /** newest.json, or null when it is missing or not one (a hint: a bad one is no hint). */
  getNewestHint(): Promise<NewestHint | null>;
  putNewestHint(hint: NewestHint): Promise<void>;
  putStatus(node: string, status: unknown): Promise<void>;
  /** Every node's report; a StoreError when one cannot be read, or is not JSON (not transient). */
  listStatuses(): Promise<unknown[]>;
  /**
   * Every node's report that can be read, and which cannot: one record's failure does not fail
   * the others. A StoreError only when the records cannot be listed.
   */
  readStatuses(): Promise<StatusRead>;
  /** Deletes every layout record but the one named (only the newest config's is ever read). */
  pruneLayouts(keep: string | null | undefined): Promise<void>;
}

export function storeRecords(blobs: BlobStore): StoreRecords {
  const { prefix } = blobs;
  const pinKey = `${prefix}${PIN}`;
  const rolloutKey = `${prefix}${ROLLOUT}`;
  const passRecordKey = `${prefix}${PASS_RECORD}`;
  const newestKey = `${prefix}${NEWEST}`;
  const statusPrefix = `${prefix}${STATUS}`;
  const layoutPrefix = `${prefix}${LAYOUTS}`;

  // Records are read by the lean GET: every pull of every agent reads pin.json (and newest.json,
  // rollout.json), and none of them needs the object's metadata.
  async function getText(key: string): Promise<string | null> {
    return (await blobs.getBody(key))?.toString("utf8") ?? null;
  }

  async function putJson(key: string, value: unknown): Promise<void> {
    await blobs.put(key, JSON.stringify(value), { contentType: "application/json" });
  }

  /** A content-addressed record: read, parsed and checked against the digest it is stored under. */
  async function readRecord<T>(
    digest: string,
    record: { what: string; prefix: string; schema: z.ZodType<T>; digestOf: (value: T) => string },
  ): Promise<T> {
    const { what, prefix: at, schema, digestOf } = record;
    if (!RECORD_DIGEST.test(digest))
      throw new Error(`${what} digest must be 16 hex digits, got ${JSON.stringify(digest)}`);
    const key = `${prefix}${at}${digest}.json`;
    const text = await getText(key);
    if (text === null) throw new StoreError(`${what} ${blobs.describe(key)} does not exist`, { transient: false });
    const parsed = parseJson(text, schema);
    if (!parsed?.success || digestOf(parsed.data) !== digest)
      throw new StoreError(`${what} ${blobs.describe(key)} is corrupt`, { transient: false });
    return parsed.data;
  }

  /**
   * The node records listed and each one's text or failure, in key order, STATUS_READS at a time,
   * a transient failure read once more; one deleted since the listing (its node went) is left out.
   */
  async function readStatusRecords(): Promise<{
    listed: number;
    records: Array<{ key: string; text: string } | { key: string; error: StoreError }>;
  }> {
    const keys = (await blobs.list(statusPrefix))
      .map((o) => o.key)
      .filter((key) => key.endsWith(".json") && isNodeName(key.slice(statusPrefix.length, -".json".length)));
    const read: Array<{ key: string; text: string } | { key: string; error: StoreError } | undefined> = [];
    const readAll = (indexes: readonly number[]) =>
      eachAtMost(indexes, STATUS_READS, async (i) => {
        const key = keys[i]!;
        try {
          const body = await blobs.getBody(key);
          read[i] = body === null ? undefined : { key, text: body.toString("utf8") };
        } catch (error) {
          read[i] = {
            key,
            error:
              error instanceof StoreError ? error : new StoreError(errorText(error), { transient: true, cause: error }),
          };
        }
      });
    await readAll(keys.map((_, i) => i));
    // A thousand GETs meet a 503 twice in a row now and then (S3 answers bursts on a prefix with
    // SlowDown): what failed so is read once more, after the others, rather than left unread.
    const again = read.flatMap((r, i) => (r !== undefined && "error" in r && r.error.transient ? [i] : []));
    if (again.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, STATUS_REREAD_MS));
      await readAll(again);
    }
    return { listed: keys.length, records: read.filter((r) => r !== undefined) };
  }

  return {
    readSettings: (digest) =>
      readRecord(digest, {
        what: "settings",
        prefix: SETTINGS,
        schema: settingsRecordSchema,
        digestOf: settingsDigest,
      }),

    readLayout: (digest) =>
      readRecord(digest, { what: "layout", prefix: LAYOUTS, schema: backendLayoutSchema, digestOf: layoutDigest }),

    async putSettings(record) {
      const digest = settingsDigest(record);
      await putJson(`${prefix}${SETTINGS}${digest}.json`, record);
      return digest;
    },

    async getNewestHint() {
      const text = await getText(newestKey);
      const parsed = text === null ? undefined : parseJson(text, newestHintSchema);
      return parsed?.success ? parsed.data : null;
    },

    putNewestHint: (hint) => putJson(newestKey, hint),

    async putLayout(layout) {
      const digest = layoutDigest(layout);
      await putJson(`${layoutPrefix}${digest}.json`, layout);
      return digest;
    },

    async getPin() {
      const text = await getText(pinKey);
      if (text === null) return null;
      let parsed: ReturnType<typeof pinSchema.safeParse>;
      try {
        parsed = pinSchema.safeParse(JSON.parse(text));
      } catch (error) {
        throw new StoreError(`pin ${blobs.describe(pinKey)} is not JSON: ${errorText(error)}`, { transient: false });
      }
      if (!parsed.success)
        throw new StoreError(
          `pin ${blobs.describe(pinKey)} is not a pin: ${parsed.error.issues.map((i) => i.message).join("; ")}`,
          { transient: false },
        );
      return parsed.data;
    },

    putPin: (pin) => putJson(pinKey, pinSchema.parse(pin)),

    deletePin: () => blobs.delete(pinKey),

    async getRollout() {
      const text = await getText(rolloutKey);
      if (text === null) return null;
      const parsed = parseJson(text, rolloutRecordSchema);
      if (!parsed?.success)
        throw new StoreError(
          `${blobs.describe(rolloutKey)} is not a rollout record${parsed ? `: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}` : " (not JSON)"}`,
          { transient: false },
        );
      return parsed.data;
    },

    putRollout: (record) => putJson(rolloutKey, rolloutRecordSchema.parse(record)),

    deleteRollout: () => blobs.delete(rolloutKey),

    async getPassRecord() {
      const text = await getText(passRecordKey);
      if (text === null) return null;
      const parsed = parseJson(text, passRecordSchema);
      if (!parsed?.success)
        throw new StoreError(`${blobs.describe(passRecordKey)} is not a record of a reconcile pass`, {
          transient: false,
        });
      return parsed.data;
    },

    putPassRecord: (record) => putJson(passRecordKey, passRecordSchema.parse(record)),

    async putStatus(node, status) {
      assertNodeName(node);
      await putJson(`${statusPrefix}${node}.json`, status);
    },

    async listStatuses() {
      const { records } = await readStatusRecords();
      return records.map((r) => {
        if ("error" in r) throw r.error;
        try {
          return JSON.parse(r.text) as unknown;
        } catch (error) {
          throw new StoreError(`status ${blobs.describe(r.key)} is not JSON: ${errorText(error)}`, {
            transient: false,
            cause: error,
          });
        }
      });
    },

    async readStatuses() {
      const { listed, records } = await readStatusRecords();
      const reports: unknown[] = [];
      const unread: StatusRead["unread"] = [];
      for (const r of records) {
        if ("error" in r) unread.push(r);
        else reports.push(parseOrText(r.text));
      }
      return { listed, reports, unread };
    },

    async pruneLayouts(keep) {
      const doomed = (await blobs.list(layoutPrefix))
        .map((o) => o.key)
        .filter((key) => key !== `${layoutPrefix}${keep}.json`);
      await deleteKeys(blobs, doomed);
    },
  };
}

const DELETE_BATCH = 10;

/**
 * One DeleteObject per key (DeleteObjects is missing from some S3-compatible stores), a few at a
 * time, in the order given: oldest first, so a failure part-way leaves the newer history in place.
 */
export async function deleteKeys(blobs: BlobStore, keys: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += DELETE_BATCH)
    await Promise.all(keys.slice(i, i + DELETE_BATCH).map((key) => blobs.delete(key)));
}

function parseJson<T>(text: string, schema: z.ZodType<T>): ReturnType<z.ZodType<T>["safeParse"]> | null {
  try {
    return schema.safeParse(JSON.parse(text));
  } catch {
    return null;
  }
}

/** The JSON a text holds, or the text itself when it holds none. */
function parseOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
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
