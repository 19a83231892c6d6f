/*
 * What a tree digest would cost a warm instance: a measurement for the design note in
 * BENCHMARKS.md ("Warm re-render"), not a digest servicelb publishes or agents verify.
 *
 * The digest it stands for: the config cut before every line that starts `backend ` (a rule
 * anyone can apply to the bytes alone), sha256 of each piece, and sha256 over those digests. A
 * warm instance hashes only the pieces in chunks it wrote anew: a chunk that is the same range of
 * the same memory as one of the last config holds the same pieces (chunks are never written once
 * rendered), so their digests stand. Here every piece of a new chunk is hashed and the root is
 * taken over one 32-byte slot per piece, which is that design's work per pass; where a piece's
 * digest goes among the slots does not change what it costs.
 */
import { createHash } from "node:crypto";

const CUT = Buffer.from("\nbackend ", "latin1");

export class TreeDigestProjection {
  /** The chunks of the last config, as ranges of their memory. */
  private seen = new WeakMap<ArrayBufferLike, Set<number>>();
  private slots = Buffer.alloc(0);
  private next = 0;

  /** The root digest of `chunks` (its value is beside the point: the work is what is measured). */
  digest(chunks: readonly Buffer[], pieces: number): string {
    if (this.slots.length !== pieces * 32) this.slots = Buffer.alloc(pieces * 32);
    const seen = new WeakMap<ArrayBufferLike, Set<number>>();
    for (const c of chunks) {
      const key = c.byteOffset * 2 ** 24 + c.length;
      const ranges = seen.get(c.buffer) ?? new Set<number>();
      seen.set(c.buffer, ranges.add(key));
      if (this.seen.get(c.buffer)?.has(key)) continue;
      let from = 0;
      for (;;) {
        const cut = c.indexOf(CUT, from);
        const to = cut < 0 ? c.length : cut + 1;
        createHash("sha256")
          .update(c.subarray(from, to))
          .digest()
          .copy(this.slots, (this.next++ % pieces) * 32);
        if (cut < 0) break;
        from = to;
      }
    }
    this.seen = seen;
    return createHash("sha256").update(this.slots).digest("hex");
  }
}
