import { createHash, type Hash } from "node:crypto";
import { z } from "zod";

/** Hex sha256 of a config's UTF-8 bytes: the identity configs are published, verified and compared by. */
export function sha256(config: string | Uint8Array): string {
  const hash = createHash("sha256");
  return (typeof config === "string" ? hash.update(config, "utf8") : hash.update(config)).digest("hex");
}

/** A whole sha256 as sha256() gives it: 64 lowercase hex digits. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;
export const sha256Schema = z.string().regex(SHA256_HEX, "64 hex digits");

/** Hash states kept every this many bytes along the last config. */
const MARK_BYTES = 256 * 1024;

/**
 * sha256 of configs given as chunks, for a warm instance that renders one config after another:
 * it keeps the hash state at points along the last config, so a config that differs from it only
 * from some chunk on is hashed from the last point before that chunk. A chunk is the same as
 * before when it is the same range of the same memory: chunks are never written once rendered.
 */
export class ChunkedSha256 {
  private chunks: readonly Uint8Array[] = [];
  /** The hash of chunks[0..at), at increasing `at`. */
  private marks: Array<{ at: number; state: Hash }> = [];

  digest(chunks: readonly Uint8Array[]): string {
    const before = this.chunks;
    let same = 0;
    const common = Math.min(before.length, chunks.length);
    while (same < common && sameRange(before[same]!, chunks[same]!)) same++;
    const marks = this.marks;
    let kept = 0;
    while (kept < marks.length && marks[kept]!.at <= same) kept++;
    marks.length = kept;
    const from = kept > 0 ? marks[kept - 1]! : undefined;
    const hash = from ? from.state.copy() : createHash("sha256");
    let since = 0;
    for (let i = from?.at ?? 0; i < chunks.length; i++) {
      hash.update(chunks[i]!);
      since += chunks[i]!.byteLength;
      if (since >= MARK_BYTES && i + 1 < chunks.length) {
        marks.push({ at: i + 1, state: hash.copy() });
        since = 0;
      }
    }
    this.chunks = chunks;
    return hash.digest("hex");
  }
}

function sameRange(a: Uint8Array, b: Uint8Array): boolean {
  return a === b || (a.buffer === b.buffer && a.byteOffset === b.byteOffset && a.byteLength === b.byteLength);
}
