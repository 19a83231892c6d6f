/*
 * s3rver's filesystem store overwrites an object in place: it truncates the file and writes the
 * new body, then its checksum and metadata files, while a GET of the key stats the file, then
 * reads as many bytes as the stat said. A record rewritten often (rollout.json, a node's report)
 * is then now and then read empty or cut short, which S3 never does: a PUT replaces an object
 * whole. These replacements write each file beside the old one and rename it over (atomic on one
 * filesystem), and a GET reads the one file it opened, its size taken from that file, so the local
 * stack and the tests see S3's semantics. Applied once per process, before a server starts.
 */

import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import type { Readable } from "node:stream";

interface StoredObject {
  bucket: string;
  key: string;
  content: Buffer | Readable;
  metadata: Record<string, string>;
}

interface FilesystemStore {
  getResourcePath(bucket: string, key: string, resource: string): string;
  getMetadata(bucket: string, key: string): Promise<Record<string, unknown>>;
  putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5?: string): Promise<void>;
  putObject(object: StoredObject): Promise<{ size: number; md5: string }>;
  getObject(bucket: string, key: string, options?: { start?: number; end?: number }): Promise<unknown>;
}

type ObjectModel = (new (
  bucket: string,
  key: string,
  content: Readable | null,
  metadata: Record<string, unknown>,
) => { range?: { start: number; end: number } }) & { ALLOWED_METADATA: string[] };

const require = createRequire(import.meta.url);
let patched = false;

async function writeAtomically(path: string, body: Buffer | string): Promise<void> {
  const temporary = `${path}.${randomBytes(6).toString("hex")}.partial`;
  await writeFile(temporary, body);
  await rename(temporary, path);
}

async function bodyOf(content: Buffer | Readable): Promise<Buffer> {
  if (Buffer.isBuffer(content)) return content;
  const chunks: Buffer[] = [];
  for await (const chunk of content) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

export function makeS3rverWritesAtomic(): void {
  if (patched) return;
  patched = true;
  const Store = require("s3rver/lib/stores/filesystem.js") as { prototype: FilesystemStore };
  const S3Object = require("s3rver/lib/models/object.js") as ObjectModel;

  Store.prototype.putMetadata = async function (bucket, key, metadata, md5) {
    const kept = Object.entries(metadata).filter(
      ([name]) => S3Object.ALLOWED_METADATA.includes(name) || name.startsWith("x-amz-meta-"),
    );
    if (md5) await writeAtomically(this.getResourcePath(bucket, key, "object.md5"), md5);
    await writeAtomically(
      this.getResourcePath(bucket, key, "metadata.json"),
      JSON.stringify(Object.fromEntries(kept), null, 2),
    );
  };

  Store.prototype.putObject = async function (object) {
    const path = this.getResourcePath(object.bucket, object.key, "object");
    await mkdir(dirname(path), { recursive: true });
    const body = await bodyOf(object.content);
    const md5 = createHash("md5").update(body).digest("hex");
    await writeAtomically(path, body);
    await this.putMetadata(object.bucket, object.key, object.metadata, md5);
    return { size: body.length, md5 };
  };

  Store.prototype.getObject = async function (bucket, key, options) {
    let file: Awaited<ReturnType<typeof open>>;
    try {
      file = await open(this.getResourcePath(bucket, key, "object"), "r");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
    try {
      const stat = await file.stat();
      const metadata = {
        ...(await this.getMetadata(bucket, key)),
        "content-length": stat.size,
        "last-modified": stat.mtime.toUTCString(),
      };
      const lastByte = Math.max(0, stat.size - 1);
      const range = { start: options?.start ?? 0, end: Math.min(options?.end ?? Infinity, lastByte) };
      const ranged = options !== undefined && (options.start !== undefined || Boolean(options.end));
      if (range.start < 0 || range.end < range.start) {
        await file.close();
        const empty = new S3Object(bucket, key, null, metadata);
        if (ranged) empty.range = range;
        return empty;
      }
      // The stream owns the handle from here, and closes it when it ends or fails.
      const content = createReadStream("", { fd: file, start: range.start, end: range.end });
      const object = new S3Object(bucket, key, content, metadata);
      if (ranged) object.range = range;
      return object;
    } catch (err) {
      await file.close().catch(() => undefined);
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
  };
}
