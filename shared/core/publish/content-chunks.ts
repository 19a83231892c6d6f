/*
 * A config cut into chunks by its content (`chunks1`), so that a config differs from the one before
 * it in the chunks around what changed, and nowhere else: the publisher uploads those, and an agent
 * that holds the config before downloads only those (adapters/config-objects.ts).
 *
 * Where a cut falls depends on the 32 bytes before it and nothing else (a gear hash, as FastCDC
 * uses), so an inserted backend or a changed server line moves no cut outside its own chunk (and,
 * through the minimum size, the next one): everyone who cuts the same bytes — the publisher, an
 * agent cutting the config it runs after a restart — finds the same chunks. Cuts fall only after a
 * newline, so chunks are whole lines. Sizes: at least MIN_CHUNK, about AVERAGE_CHUNK, at most
 * MAX_CHUNK (a line longer than that is cut inside it). A chunk is named by its sha256.
 */
import { hash } from "node:crypto";

export const MIN_CHUNK = 2 * 1024;
export const MAX_CHUNK = 64 * 1024;
/**
 * Cuts are taken at a newline where the hash's top CUT_BITS bits are 0. The top bits, because a
 * gear hash's low bit k depends on the last k bytes only, which at a newline are the common ends of
 * server lines; the top ones see the whole 32 bytes before.
 */
const CUT_BITS = 8;
const SHIFT = 32 - CUT_BITS;
const NEWLINE = 0x0a;

/** 256 fixed pseudo-random 32-bit values (a changed table would cut every config anew). */
const GEAR = (() => {
  const table = new Uint32Array(256);
  let x = 0x9e3779b9;
  for (let i = 0; i < 256; i++) {
    // xorshift32: deterministic, and spread enough for a gear table.
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    table[i] = x >>> 0;
  }
  return table;
})();

/** Where each chunk of `bytes` ends (exclusive), in order; the last is bytes.length. */
export function chunkEnds(bytes: Uint8Array): number[] {
  const ends: number[] = [];
  const n = bytes.length;
  let start = 0;
  while (start < n) {
    const limit = Math.min(n, start + MAX_CHUNK);
    let end = limit;
    let h = 0;
    // The hash needs no more than 32 bytes before a cut; bytes before that are skipped.
    let at = Math.min(limit, start + MIN_CHUNK - 32);
    for (; at < limit; at++) {
      h = ((h << 1) + GEAR[bytes[at]!]!) | 0;
      if (bytes[at] === NEWLINE && at + 1 - start >= MIN_CHUNK && h >>> SHIFT === 0) {
        end = at + 1;
        break;
      }
    }
    ends.push(end);
    start = end;
  }
  return ends;
}

export interface Chunk {
  /** sha256 of its bytes, 64 hex digits. */
  name: string;
  bytes: Buffer;
}

export function chunkName(bytes: Uint8Array): string {
  return hash("sha256", bytes, "hex");
}

/** `bytes` as its chunks, each a view into `bytes`. */
export function chunksOf(bytes: Buffer): Chunk[] {
  let start = 0;
  return chunkEnds(bytes).map((end) => {
    const chunk = bytes.subarray(start, end);
    start = end;
    return { name: chunkName(chunk), bytes: chunk };
  });
}
