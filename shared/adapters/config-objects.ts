/*
 * Published configs as objects: <prefix>configs/<epoch>-<revision>-<seq>-<sha>.cfg (see
 * core/publish/config-key.ts for the fields and their order). A key alone is never trusted (anyone with
 * write access can make one): its object's metadata (digest, revision, epoch, seq, size) must
 * agree with it, and a body must hash to that digest before anyone uses it.
 */
import { isAscii, isUtf8 } from "node:buffer";
import { gunzipSync } from "node:zlib";
import { eachAtMost } from "../core/at-most.js";
import { parseChunkedBody } from "../core/publish/chunk-manifest.js";
import { chunkName, chunksOf } from "../core/publish/content-chunks.js";
import { type DigestKind, digestHex, digestKind, SuccessiveDigests } from "../core/publish/config-digest.js";
import { compareConfigNames, type ConfigName, parseConfigName } from "../core/publish/config-key.js";
import { SHA256_HEX } from "../core/publish/sha256.js";
import type { BlobStore } from "./blob-store.js";
import { RECORD_DIGEST } from "./store-records.js";
import { errorText, StoreError } from "./store-error.js";
import { ObjectTooLargeError } from "./store-limits.js";
import { errorMessage } from "../core/error-message.js";

export const CONFIGS = "configs/";
export const CHUNKS = "chunks/";
/** Stable-track configs of a canary rollout (core/haproxy-config/endpoint-transplant.ts), named by their sha256. */
export const TRACKS = "tracks/";
const TRACK_NAME = /^([0-9a-f]{64})\.cfg$/;
/** The `format` metadata of a config published in chunks (core/publish/chunk-manifest.ts). */
export const CHUNKS1 = "chunks1";
/** Chunks an agent fetches at once when it lacks many (a new agent, one far behind). */
const CHUNK_FETCHES = 8;

export interface ConfigRef {
  key: string;
  /** The config body's digest (core/publish/config-digest.ts): 64 hex digits of its sha256, or tree1:<hex>. */
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
  /** Published in chunks (core/publish/chunk-manifest.ts) rather than as one object. */
  chunked?: boolean;
}

export interface StoredConfig extends ConfigRef {
  config: string;
}

export interface ConfigEntry {
  key: string;
  name: ConfigName;
  size: number;
  lastModified: Date;
}

/** The metadata a config is written with (see ConfigObjects.verifyMetadata for what is checked). */
export function configMetadata(o: {
  digest: string;
  revision: string;
  generator: string;
  epoch: number;
  seq: number;
  bytes: number;
  settings?: string;
  layout?: string;
  chunked?: boolean;
}): Record<string, string> {
  // A tree1 config's digest is under `digest`, so that an agent that knows only sha256 skips it
  // for want of a sha256 rather than read one it cannot match.
  const metadata: Record<string, string> = {
    [digestKind(o.digest) === "sha256" ? "sha256" : "digest"]: o.digest,
    revision: o.revision,
    generator: o.generator,
    epoch: String(o.epoch),
    seq: String(o.seq),
    bytes: String(o.bytes),
  };
  if (o.settings) metadata.settings = o.settings;
  if (o.layout) metadata.layout = o.layout;
  if (o.chunked) metadata.format = CHUNKS1;
  return metadata;
}

export class ConfigObjects {
  readonly configsPrefix: string;
  /** A reader gets one config after another, each mostly the one before: tree1 verifies from what the last left. */
  private readonly digests = new SuccessiveDigests();

  constructor(readonly blobs: BlobStore) {
    this.configsPrefix = `${blobs.prefix}${CONFIGS}`;
  }

  corrupt(key: string, problem: string): StoreError {
    return new StoreError(`config ${this.blobs.describe(key)} is corrupt: ${problem}`, { transient: false });
  }

  parseKey(key: string): ConfigName | null {
    return key.startsWith(this.configsPrefix) ? parseConfigName(key.slice(this.configsPrefix.length)) : null;
  }

  requireKey(key: string): ConfigName {
    const name = this.parseKey(key);
    if (!name) {
      const { bucket, prefix } = this.blobs;
      throw new Error(
        `${JSON.stringify(key)} is not a config key of s3://${bucket}/${prefix} (expected ${this.configsPrefix}<epoch>-<revision>-<seq>-<sha>.cfg)`,
      );
    }
    return name;
  }

  /** Config entries in decision order, oldest first. Foreign objects are ignored. */
  async list(startAfter?: string): Promise<ConfigEntry[]> {
    const entries: ConfigEntry[] = [];
    for (const object of await this.blobs.list(this.configsPrefix, startAfter)) {
      const name = this.parseKey(object.key);
      if (name) entries.push({ key: object.key, name, size: object.size, lastModified: object.lastModified });
    }
    // Not S3's listing order: names of the first key format sort differently as strings.
    return entries.sort((a, b) => compareConfigNames(a.name, b.name));
  }

  /** The metadata of a config, checked against the key it is stored under. */
  verifyMetadata(key: string, name: ConfigName, metadata: Record<string, string>, size: number): ConfigHead {
    const sha = metadata.digest ?? metadata.sha256;
    if (!sha) throw this.corrupt(key, "no sha256 or digest metadata");
    const shaped = metadata.digest !== undefined ? TREE1_DIGEST.test(sha) : SHA256_HEX.test(sha);
    if (!shaped || !digestHex(sha).startsWith(name.shaPrefix))
      throw this.corrupt(key, `metadata digest ${sha} does not match the key's digest prefix ${name.shaPrefix}`);
    const revision = name.revision.toString();
    if (metadata.revision !== revision)
      throw this.corrupt(key, `metadata revision ${metadata.revision ?? "(none)"} but the key says ${revision}`);
    if (!name.legacy && (metadata.epoch !== String(name.epoch) || metadata.seq !== String(name.seq))) {
      throw this.corrupt(
        key,
        `metadata epoch/seq ${metadata.epoch ?? "(none)"}/${metadata.seq ?? "(none)"} but the key says ${name.epoch}/${name.seq}`,
      );
    }
    const chunked = metadata.format === CHUNKS1;
    if (metadata.format !== undefined && !chunked)
      throw this.corrupt(key, `its format ${metadata.format} is not one this servicelb reads (${CHUNKS1})`);
    // A chunked config's size is that of the config it assembles to, checked once assembled.
    if (!chunked && metadata.bytes !== undefined && Number(metadata.bytes) !== size)
      throw this.corrupt(key, `${size} bytes but the metadata says ${metadata.bytes}`);
    const settings = metadata.settings;
    const layout = metadata.layout;
    return {
      key,
      sha256: sha,
      revision,
      generator: metadata.generator ?? "",
      epoch: name.epoch,
      seq: name.seq,
      settingsDigest: settings && RECORD_DIGEST.test(settings) ? settings : null,
      layoutDigest: layout && RECORD_DIGEST.test(layout) ? layout : null,
      ...(chunked ? { chunked } : {}),
    };
  }

  async head(key: string, name: ConfigName = this.requireKey(key)): Promise<ConfigHead> {
    const { metadata, size } = await this.blobs.head(key);
    return this.verifyMetadata(key, name, metadata, size);
  }

  /** A stable-track config's key: `<prefix>tracks/<sha256>.cfg`, outside the configs' order. */
  isTrack(key: string): boolean {
    return key.startsWith(`${this.blobs.prefix}${TRACKS}`);
  }

  /** Written once per text (content-addressed); `revision` is the newest config's it was made from. */
  async putTrack(text: string, revision: string): Promise<StoredConfig> {
    const sha256 = this.digests.digest("sha256", Buffer.from(text, "utf8"));
    const key = `${this.blobs.prefix}${TRACKS}${sha256}.cfg`;
    await this.blobs.put(key, text, { contentType: "text/plain", metadata: { sha256, revision } });
    return { key, config: text, sha256, revision };
  }

  /** A stable-track config, its body verified against the digest its name is. */
  async getTrack(key: string): Promise<StoredConfig> {
    const sha = TRACK_NAME.exec(key.slice(`${this.blobs.prefix}${TRACKS}`.length))?.[1];
    if (!this.isTrack(key) || sha === undefined)
      throw this.corrupt(key, "not a stable-track key (tracks/<sha256>.cfg)");
    const blob = await this.blobs.get(key);
    if (!blob) throw new StoreError(`config ${this.blobs.describe(key)} does not exist`, { transient: false });
    return {
      key,
      config: this.verifiedText(key, sha, blob.body),
      sha256: sha,
      revision: blob.metadata.revision ?? "0",
    };
  }

  /** Deletes every stable-track config but those named. */
  async pruneTracks(keep: readonly string[]): Promise<void> {
    const doomed = (await this.blobs.list(`${this.blobs.prefix}${TRACKS}`))
      .map((o) => o.key)
      .filter((k) => !keep.includes(k));
    for (const key of doomed) await this.blobs.delete(key);
  }

  /**
   * Fetches a config and verifies its body against its metadata and key. A chunked config takes
   * the chunks it does not carry inline from the config this reader assembled last, or from
   * `have` (text of a config the caller holds: an agent's running config), and fetches only the
   * rest; every chunk must hash to its name, and the whole config to its digest, before it is
   * returned. Nothing is remembered from a config that does not verify.
   */
  async get(key: string, options: { have?: string } = {}): Promise<StoredConfig> {
    if (this.isTrack(key)) return this.getTrack(key);
    const name = this.requireKey(key);
    const blob = await this.blobs.get(key);
    if (!blob) throw new StoreError(`config ${this.blobs.describe(key)} does not exist`, { transient: false });
    const head = this.verifyMetadata(key, name, blob.metadata, blob.size);
    if (!head.chunked)
      return {
        key,
        config: this.verifiedText(key, head.sha256, blob.body),
        sha256: head.sha256,
        revision: head.revision,
      };
    const { bytes, chunks } = await this.assemble(key, blob.body, Number(blob.metadata.bytes), options.have);
    const config = this.verifiedText(key, head.sha256, bytes);
    this.held = chunks;
    return { key, config, sha256: head.sha256, revision: head.revision };
  }

  /** The chunks of the config assembled last, by name (views into its bytes). */
  private held = new Map<string, Buffer>();
  /** `have` cut into chunks, once per text. */
  private haveIndex: { text: string; chunks: Map<string, Buffer> } | null = null;

  /** The names of the chunks of a chunked config's body (a publisher's view: nothing is fetched). */
  chunkNames(key: string, body: Buffer): string[] {
    return this.parseBody(key, body).entries.map((e) => e.name);
  }

  private parseBody(key: string, body: Buffer) {
    let plain: Buffer;
    try {
      plain = gunzipSync(body, { maxOutputLength: this.blobs.maxObjectBytes });
    } catch (err) {
      if ((err as { code?: unknown }).code === "ERR_BUFFER_TOO_LARGE") {
        const cause = new ObjectTooLargeError(null, this.blobs.maxObjectBytes);
        throw new StoreError(`config ${this.blobs.describe(key)} refused: ${cause.message}`, {
          transient: false,
          cause,
        });
      }
      throw this.corrupt(key, `its chunk manifest does not decompress: ${errorText(err)}`);
    }
    try {
      return parseChunkedBody(plain);
    } catch (err) {
      throw this.corrupt(key, errorMessage(err));
    }
  }

  private async assemble(
    key: string,
    body: Buffer,
    declared: number,
    have: string | undefined,
  ): Promise<{ bytes: Buffer; chunks: Map<string, Buffer> }> {
    const { entries, inline } = this.parseBody(key, body);
    const total = entries.reduce((n, e) => n + e.size, 0);
    if (total !== declared)
      throw this.corrupt(key, `its chunks add up to ${total} bytes but the metadata says ${declared}`);
    const cap = this.blobs.maxObjectBytes;
    if (total > cap) {
      const cause = new ObjectTooLargeError(total, cap);
      throw new StoreError(`config ${this.blobs.describe(key)} refused: ${cause.message}`, { transient: false, cause });
    }
    const parts: Buffer[] = new Array(entries.length);
    const wanted: number[] = [];
    let at = 0;
    for (const [i, e] of entries.entries()) {
      if (e.inline) {
        const part = inline.subarray(at, at + e.size);
        at += e.size;
        if (chunkName(part) !== e.name) throw this.corrupt(key, `its inline chunk ${e.name} does not hash to its name`);
        parts[i] = part;
      } else {
        const held = this.held.get(e.name) ?? this.haveChunks(have)?.get(e.name);
        if (held?.length === e.size) parts[i] = held;
        else wanted.push(i);
      }
    }
    await eachAtMost(wanted, CHUNK_FETCHES, async (i) => {
      parts[i] = await this.fetchChunk(key, entries[i]!.name, entries[i]!.size);
    });
    const bytes = Buffer.concat(parts, total);
    const chunks = new Map<string, Buffer>();
    at = 0;
    for (const e of entries) {
      chunks.set(e.name, bytes.subarray(at, at + e.size));
      at += e.size;
    }
    return { bytes, chunks };
  }

  private haveChunks(have: string | undefined): Map<string, Buffer> | null {
    if (have === undefined) return null;
    if (this.haveIndex?.text !== have) {
      const chunks = new Map<string, Buffer>();
      for (const c of chunksOf(Buffer.from(have, "utf8"))) chunks.set(c.name, c.bytes);
      this.haveIndex = { text: have, chunks };
    }
    return this.haveIndex.chunks;
  }

  private async fetchChunk(key: string, name: string, size: number): Promise<Buffer> {
    const chunkKey = `${this.blobs.prefix}${CHUNKS}${name}`;
    const blob = await this.blobs.get(chunkKey);
    if (!blob) throw this.corrupt(key, `its chunk ${this.blobs.describe(chunkKey)} is missing`);
    if (blob.body.length !== size || chunkName(blob.body) !== name)
      throw this.corrupt(key, `its chunk ${this.blobs.describe(chunkKey)} does not hash to its name`);
    return blob.body;
  }

  /** The config's text, once `body` hashes to `digest`. */
  verifiedText(key: string, digest: string, body: Buffer): string {
    const kind: DigestKind = digestKind(digest);
    const actual = this.digests.digest(kind, body);
    if (actual !== digest)
      throw this.corrupt(
        key,
        `the body's ${kind} digest is ${digestHex(actual)} but the metadata says ${digestHex(digest)}`,
      );
    // The bytes verified are the bytes applied: text that is not UTF-8 would be changed by decoding.
    if (!isUtf8(body)) throw this.corrupt(key, "the body is not UTF-8 text");
    // A config is ASCII but for what annotations may bring: one byte per character, decoded as such.
    return body.toString(isAscii(body) ? "latin1" : "utf8");
  }
}

const TREE1_DIGEST = /^tree1:[0-9a-f]{64}$/;
