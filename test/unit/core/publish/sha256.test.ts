import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkedSha256 } from "../../../../shared/core/publish/sha256.js";

const whole = (chunks: readonly Uint8Array[]) => createHash("sha256").update(Buffer.concat(chunks)).digest("hex");

/** A chunk list as a warm render leaves it: most chunks the very ranges of the last list, some new. */
function next(before: Buffer[], edits: Array<{ at: number; op: "replace" | "insert" | "delete"; size: number }>) {
  const after = [...before];
  for (const e of edits) {
    const at = after.length === 0 ? 0 : e.at % after.length;
    const fresh = Buffer.alloc(e.size, (e.at * 7 + e.size) % 251);
    if (e.op === "insert" || after.length === 0) after.splice(at, 0, fresh);
    else if (e.op === "delete") after.splice(at, 1);
    else after[at] = fresh;
  }
  return after;
}

describe("the chunked sha256", () => {
  it("gives every config's sha256, whatever changed since the last one", () => {
    const edit = fc.record({
      at: fc.nat(),
      op: fc.constantFrom("replace" as const, "insert" as const, "delete" as const),
      size: fc.integer({ min: 0, max: 300_000 }),
    });
    // One large slab cut into ranges, as a cold render leaves it. Filled once: no run writes to it
    // (an edit is a fresh buffer), and filling it byte by byte took most of each run.
    const slab = Buffer.alloc(3_000_000);
    for (let i = 0; i < slab.length; i++) slab[i] = (i * 31) % 256;
    fc.assert(
      fc.property(fc.array(fc.array(edit, { maxLength: 4 }), { minLength: 1, maxLength: 8 }), (passes) => {
        const hasher = new ChunkedSha256();
        let chunks: Buffer[] = [];
        for (let at = 0; at < slab.length; at += 100_000) chunks.push(slab.subarray(at, at + 100_000));
        expect(hasher.digest(chunks)).toBe(whole(chunks));
        for (const edits of passes) {
          chunks = next(chunks, edits);
          expect(hasher.digest(chunks)).toBe(whole(chunks));
        }
      }),
      { numRuns: 40 },
    );
  });

  it("sees a changed range of the same memory as changed", () => {
    const hasher = new ChunkedSha256();
    const slab = Buffer.alloc(2_000_000, 1);
    const chunks = [slab.subarray(0, 1_000_000), slab.subarray(1_000_000)];
    hasher.digest(chunks);
    const shorter = [slab.subarray(0, 1_000_000), slab.subarray(1_000_000, 1_999_999)];
    expect(hasher.digest(shorter)).toBe(whole(shorter));
  });
});
