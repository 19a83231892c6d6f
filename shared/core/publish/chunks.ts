/*
 * A rendered config as a list of byte chunks. At 10,000 Services a config is megabytes; joining it
 * into one buffer is a copy of all of it (and the page faults of a fresh allocation) on every
 * render, while hashing, uploading and writing it can all take the chunks as they are.
 */

/** A config as the chunks it was written in, in order. */
export interface ConfigChunks {
  readonly chunks: readonly Buffer[];
  readonly byteLength: number;
}

/**
 * Collects chunks, joining adjacent ranges of one slab into one chunk: a cold render's backends
 * sit side by side in a few slabs, so they leave as a few large chunks rather than one per backend.
 */
export class ChunkList implements ConfigChunks {
  private readonly list: Buffer[] = [];
  private slab: Buffer | undefined;
  private start = 0;
  private end = 0;
  byteLength = 0;

  get chunks(): readonly Buffer[] {
    this.flush();
    return this.list;
  }

  push(chunk: Buffer): void {
    this.flush();
    this.list.push(chunk);
    this.byteLength += chunk.length;
  }

  /** Bytes `start`..`end` of `slab`. */
  add(slab: Buffer, start: number, end: number): void {
    if (slab === this.slab && start === this.end) {
      this.end = end;
    } else {
      this.flush();
      this.slab = slab;
      this.start = start;
      this.end = end;
    }
    this.byteLength += end - start;
  }

  private flush(): void {
    if (this.slab === undefined) return;
    this.list.push(this.slab.subarray(this.start, this.end));
    this.slab = undefined;
  }
}

/** Where rendered text goes: written as UTF-8 bytes, never built into a string first. */
export interface ByteWriter {
  text(s: string): void;
  bytes(b: Uint8Array): void;
}

/** Also the finest grain at which a warm instance's hash resumes (sha256.ts). */
const SLAB_BYTES = 256 * 1024;

/**
 * Writes items one after another into large slabs and says where each went (`begin`, then
 * `end`). Bytes once written are never overwritten, so a range handed out stays valid for as long
 * as anyone holds its slab; the space left in the last slab is used by the next render. Text is
 * copied byte by byte in JavaScript: config text is ASCII but for rare values, and a loop beats a
 * call into the runtime for the short values an item is made of.
 */
export class SlabWriter implements ByteWriter {
  private slab = Buffer.allocUnsafe(0);
  private pos = 0;
  private first = 0;
  /** Where the last item went, in the slab `end` returned. */
  start = 0;
  stop = 0;

  begin(): void {
    this.first = this.pos;
  }

  end(): Buffer {
    this.start = this.first;
    this.stop = this.pos;
    return this.slab;
  }

  text(s: string): void {
    const n = s.length;
    // At most 3 UTF-8 bytes per UTF-16 unit.
    if (n * 3 > this.slab.length - this.pos) this.room(n * 3);
    const b = this.slab;
    let p = this.pos;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) {
        b[p++] = c;
      } else {
        p += b.write(s.slice(i), p, "utf8");
        break;
      }
    }
    this.pos = p;
  }

  /** Bytes written of the item so far. */
  written(): number {
    return this.pos - this.first;
  }

  /** Bytes `start`..`end` of `from`, a slab written before. */
  range(from: Buffer, start: number, end: number): void {
    const n = end - start;
    if (n > this.slab.length - this.pos) this.room(n);
    from.copy(this.slab, this.pos, start, end);
    this.pos += n;
  }

  bytes(u: Uint8Array): void {
    const n = u.length;
    if (n > this.slab.length - this.pos) this.room(n);
    const b = this.slab;
    const p = this.pos;
    if (n > 64) b.set(u, p);
    else for (let i = 0; i < n; i++) b[p + i] = u[i]!;
    this.pos = p + n;
  }

  /** A new slab with room for `more` bytes after the item being written, which moves along. */
  private room(more: number): void {
    const partial = this.pos - this.first;
    const next = Buffer.allocUnsafe(Math.max(SLAB_BYTES, 2 * (partial + more)));
    this.slab.copy(next, 0, this.first, this.pos);
    this.slab = next;
    this.first = 0;
    this.pos = partial;
  }
}
