/*
 * The tree digest of a config (`tree1`): the config is cut before every line that starts
 * `backend ` (not at its very first byte), each piece is hashed with sha256, and the digest is
 * sha256 of `servicelb tree1\n` followed by the 32-byte digest of each piece in order. It is a
 * function of the bytes alone, so agents and operators compute it the way publishers do; what it
 * buys is that a warm instance hashes only the backends it rendered anew, where a sha256 of the
 * config as one stream hashes from the first changed byte to the end (BENCHMARKS.md, "Warm
 * re-render").
 */
import { createHash, hash } from "node:crypto";
import { BACKEND_CUT } from "../haproxy-config/server-line.js";

const PREFIX = Buffer.from("servicelb tree1\n", "latin1");
const CUT = Buffer.from(BACKEND_CUT, "latin1");
const BACKEND = CUT.subarray(1);
const NEWLINE = 0x0a;
const DIGEST_BYTES = 32;

function pieceDigest(bytes: Uint8Array): Buffer {
  return hash("sha256", bytes, "buffer");
}

/** The digest over the pieces' digests, given as runs of 32-byte digests in order. */
function rootOf(digests: readonly Uint8Array[]): string {
  const h = createHash("sha256").update(PREFIX);
  for (const d of digests) h.update(d);
  return h.digest("hex");
}

/** Offsets in `bytes` where a line starting `backend ` begins, offset 0 included when it does. */
function backendStarts(bytes: Buffer): number[] {
  const starts: number[] = [];
  if (bytes.length >= BACKEND.length && bytes.subarray(0, BACKEND.length).equals(BACKEND)) starts.push(0);
  for (let at = bytes.indexOf(CUT); at >= 0; at = bytes.indexOf(CUT, at + 1)) starts.push(at + 1);
  return starts;
}

/** The tree digest of a whole config, as 64 hex digits. */
export function treeDigest(config: string | Uint8Array): string {
  const bytes =
    typeof config === "string"
      ? Buffer.from(config, "utf8")
      : Buffer.from(config.buffer, config.byteOffset, config.byteLength);
  return rootOf([piecesOf(bytes).digests]);
}

/** What a chunk holds, worked out once for as long as the chunk stays in the config. */
interface ChunkPieces {
  /** Names the chunk in the keys of pieces that run across chunks. */
  serial: number;
  starts: number[];
  /** Digests of the pieces between consecutive starts, which lie wholly inside the chunk, 32 bytes each. */
  inner: Buffer;
}

type Known = WeakMap<ArrayBufferLike, Map<string, ChunkPieces>>;

/**
 * Tree digests of configs given as chunks, for a warm instance that renders one config after
 * another: a chunk that is the same range of the same memory as one of the last config holds the
 * same pieces (chunks are never written once rendered), so only the pieces of new chunks are
 * hashed again, and a piece that runs across chunks only when one of its parts is new. Chunks that
 * end mid-line (never the renderer's) are hashed as one joined config instead: where lines start
 * could then depend on the chunk before.
 */
export class ChunkedTreeDigest {
  private known: Known = new WeakMap();
  /** Digests of the last config's pieces that ran across chunks, by the ranges they were made of. */
  private across = new Map<string, Buffer>();
  private serials = 0;

  digest(chunks: readonly Buffer[]): string {
    for (let i = 0; i + 1 < chunks.length; i++) {
      const c = chunks[i]!;
      if (c.length > 0 && c[c.length - 1] !== NEWLINE) {
        this.known = new WeakMap();
        this.across.clear();
        return treeDigest(Buffer.concat(chunks));
      }
    }
    const known: Known = new WeakMap();
    const across = new Map<string, Buffer>();
    const digests: Buffer[] = [];
    // The piece under way: its parts in the chunks seen since its start, and their ranges as a key.
    let open: Buffer[] = [];
    let key = "";
    const part = (entry: ChunkPieces, c: Buffer, from: number, to: number) => {
      open.push(from === 0 && to === c.length ? c : c.subarray(from, to));
      key += `${entry.serial}:${from}:${to} `;
    };
    const close = () => {
      if (open.length === 0) return;
      let d = this.across.get(key);
      if (!d) {
        if (open.length === 1) d = pieceDigest(open[0]!);
        else {
          const h = createHash("sha256");
          for (const o of open) h.update(o);
          d = h.digest();
        }
      }
      across.set(key, d);
      digests.push(d);
      open = [];
      key = "";
    };
    for (const c of chunks) {
      if (c.length === 0) continue;
      const entry = this.pieces(c, known);
      const { starts } = entry;
      if (starts.length === 0) {
        part(entry, c, 0, c.length);
        continue;
      }
      if (starts[0]! > 0) part(entry, c, 0, starts[0]!);
      // Nothing is open at the config's first byte, which is never a cut: no empty piece 0.
      close();
      if (entry.inner.length > 0) digests.push(entry.inner);
      part(entry, c, starts[starts.length - 1]!, c.length);
    }
    close();
    this.known = known;
    this.across = across;
    return rootOf(digests);
  }

  private pieces(c: Buffer, next: Known): ChunkPieces {
    const id = `${c.byteOffset}:${c.length}`;
    let entry = this.known.get(c.buffer)?.get(id);
    if (!entry) {
      const starts = backendStarts(c);
      const inner = Buffer.allocUnsafe(Math.max(0, starts.length - 1) * DIGEST_BYTES);
      for (let i = 0; i + 1 < starts.length; i++)
        pieceDigest(c.subarray(starts[i], starts[i + 1])).copy(inner, i * DIGEST_BYTES);
      entry = { serial: this.serials++, starts, inner };
    }
    const ranges = next.get(c.buffer) ?? new Map<string, ChunkPieces>();
    next.set(c.buffer, ranges.set(id, entry));
    return entry;
  }
}

/** A config's pieces: where each starts (the first at 0), and their digests, 32 bytes each. */
interface Pieces {
  bytes: Buffer;
  starts: number[];
  digests: Buffer;
}

/**
 * Tree digests of whole configs one after another, as an agent verifies the configs it pulls:
 * each shares most of its bytes with the one before, so the pieces that lie in the bytes both
 * share at their start or at their end keep their digests, and only those around what changed are
 * found and hashed again. Which bytes are shared is found by comparing, which is several times
 * faster than hashing them.
 */
export class SuccessiveTreeDigest {
  private last: Pieces | null = null;

  digest(bytes: Buffer): string {
    const last = this.last;
    const next = last === null ? piecesOf(bytes) : piecesAfter(last, bytes);
    this.last = next;
    return rootOf([next.digests]);
  }
}

function piecesOf(bytes: Buffer): Pieces {
  const starts = bytes.length === 0 ? [] : [0, ...backendStarts(bytes).filter((at) => at > 0)];
  return { bytes, starts, digests: digestsOf(bytes, starts, bytes.length) };
}

/** Digests of the pieces at `starts` in `bytes`, the last running to `end`. */
function digestsOf(bytes: Buffer, starts: readonly number[], end: number): Buffer {
  const out = Buffer.allocUnsafe(starts.length * DIGEST_BYTES);
  for (let i = 0; i < starts.length; i++)
    pieceDigest(bytes.subarray(starts[i], i + 1 < starts.length ? starts[i + 1] : end)).copy(out, i * DIGEST_BYTES);
  return out;
}

/**
 * Whether a cut lies at an offset is decided by the byte before it and the 8 after it: a piece
 * whose bytes and closing cut lie wholly in a shared prefix is the same piece in both configs, and
 * so is one whose opening cut's newline lies in a shared suffix.
 */
function piecesAfter(last: Pieces, bytes: Buffer): Pieces {
  const old = last.bytes;
  const prefix = sharedPrefix(old, bytes);
  const suffix = sharedSuffix(old, bytes, Math.min(old.length, bytes.length) - prefix);
  const shift = bytes.length - old.length;
  const n = last.starts.length;
  // Pieces 0..head-1 are kept at the start, tail..n-1 at the end.
  let head = 0;
  while (head + 1 < n && last.starts[head + 1]! + BACKEND.length <= prefix) head++;
  let tail = n;
  while (tail - 1 > head && last.starts[tail - 1]! - 1 >= old.length - suffix) tail--;
  const from = head < n ? last.starts[head]! : 0;
  const to = tail < n ? last.starts[tail]! + shift : bytes.length;
  const middle: number[] = bytes.length === 0 ? [] : [from];
  const window = bytes.subarray(from, Math.min(bytes.length, to + BACKEND.length));
  for (let at = window.indexOf(CUT); at >= 0; at = window.indexOf(CUT, at + 1)) {
    const cut = from + at + 1;
    if (cut >= to) break;
    middle.push(cut);
  }
  const starts = [...last.starts.slice(0, head), ...middle, ...last.starts.slice(tail).map((at) => at + shift)];
  const digests = Buffer.concat([
    last.digests.subarray(0, head * DIGEST_BYTES),
    digestsOf(bytes.subarray(0, to), middle, to),
    last.digests.subarray(tail * DIGEST_BYTES),
  ]);
  return { bytes, starts, digests };
}

const COMPARE_BLOCK = 64 * 1024;

function sharedPrefix(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  let at = 0;
  while (at + COMPARE_BLOCK <= n && a.subarray(at, at + COMPARE_BLOCK).equals(b.subarray(at, at + COMPARE_BLOCK)))
    at += COMPARE_BLOCK;
  while (at < n && a[at] === b[at]) at++;
  return at;
}

/** Bytes shared at the end, at most `limit` (so that it never overlaps the shared prefix). */
function sharedSuffix(a: Buffer, b: Buffer, limit: number): number {
  let k = 0;
  while (
    k + COMPARE_BLOCK <= limit &&
    a
      .subarray(a.length - k - COMPARE_BLOCK, a.length - k)
      .equals(b.subarray(b.length - k - COMPARE_BLOCK, b.length - k))
  )
    k += COMPARE_BLOCK;
  while (k < limit && a[a.length - 1 - k] === b[b.length - 1 - k]) k++;
  return k;
}
