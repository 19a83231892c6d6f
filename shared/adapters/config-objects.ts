/*
 * Published configs as objects: <prefix>configs/<epoch>-<revision>-<seq>-<sha>.cfg (see
 * core/config-key.ts for the fields and their order). A key alone is never trusted (anyone with
 * write access can make one): its object's metadata (digest, revision, epoch, seq, size) must
 * agree with it, and a body must hash to that digest before anyone uses it.
 */
import { isAscii, isUtf8 } from "node:buffer";
import { type DigestKind, digestHex, digestKind, SuccessiveDigests } from "../core/config-digest.js";
import { compareConfigNames, type ConfigName, parseConfigName } from "../core/config-key.js";
import { SHA256_HEX } from "../core/sha256.js";
import type { BlobStore } from "./blob-store.js";
import { RECORD_DIGEST } from "./store-records.js";
import { StoreError } from "./store-error.js";

export const CONFIGS = "configs/";

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
    if (metadata.bytes !== undefined && Number(metadata.bytes) !== size)
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
    };
  }

  async head(key: string, name: ConfigName = this.requireKey(key)): Promise<ConfigHead> {
    const { metadata, size } = await this.blobs.head(key);
    return this.verifyMetadata(key, name, metadata, size);
  }

  /** Fetches a config and verifies its body against its metadata and key. */
  async get(key: string): Promise<StoredConfig> {
    const name = this.requireKey(key);
    const blob = await this.blobs.get(key);
    if (!blob) throw new StoreError(`config ${this.blobs.describe(key)} does not exist`, { transient: false });
    const head = this.verifyMetadata(key, name, blob.metadata, blob.size);
    return {
      key,
      config: this.verifiedText(key, head.sha256, blob.body),
      sha256: head.sha256,
      revision: head.revision,
    };
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
