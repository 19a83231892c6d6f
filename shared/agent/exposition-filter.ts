/*
 * Keeps the named metric families of a Prometheus text exposition (format 0.0.4, what HAProxy's
 * exporter writes), streaming: the page of a node at 10,000 Services is tens of MiB and is never
 * held whole. A family's `# HELP` and `# TYPE` lines go with it; other comments and empty lines
 * are dropped. Lines that are not samples (no metric name), an unterminated last line (the format
 * ends every line with a newline: a page cut short must not yield a cut value) and lines longer
 * than the limit are dropped and counted; memory stays within one line of the limit.
 */

import { Transform, type TransformCallback } from "node:stream";

/** What the filter dropped because it could not read it. */
export interface FilterCounts {
  /** Not a sample nor a comment naming a family, or an unterminated last line. */
  malformed: number;
  /** Over the line limit. */
  tooLong: number;
}

/** Far above any line of HAProxy's exporter (a sample with its labels is a few hundred bytes). */
export const MAX_LINE_BYTES = 64 * 1024;

const NEWLINE = 0x0a;
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const FAMILY_COMMENT = /^#[ \t]+(?:HELP|TYPE)[ \t]+([^ \t]+)/;
/** A sample's name up to its labels or its value. */
const SAMPLE = /^([^{ \t]+)[{ \t]/;
/** The samples a histogram or summary family writes under names of its own. */
const FAMILY_SUFFIXES = ["_bucket", "_sum", "_count"];

/** The filter as a step over chunks, with no stream around it (tests feed it directly). */
export class FamilyFilter {
  readonly counts: FilterCounts = { malformed: 0, tooLong: 0 };
  /** The family named by the last `# HELP` or `# TYPE` line: the samples after it are its own. */
  private family: string | null = null;
  private partial: Buffer[] = [];
  private partialBytes = 0;
  /** Inside a line over the limit: everything up to its newline is dropped. */
  private skipping = false;

  constructor(
    private readonly families: ReadonlySet<string>,
    private readonly maxLineBytes = MAX_LINE_BYTES,
  ) {}

  /** The kept lines that this chunk completes, each with its newline. */
  write(chunk: Buffer): Buffer[] {
    const kept: Buffer[] = [];
    let from = 0;
    while (from < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, from);
      const end = newline < 0 ? chunk.length : newline;
      if (this.skipping) {
        if (newline >= 0) this.skipping = false;
      } else if (this.partialBytes + (end - from) > this.maxLineBytes) {
        this.counts.tooLong++;
        this.dropPartial();
        this.skipping = newline < 0;
      } else if (newline < 0) {
        this.partial.push(chunk.subarray(from, end));
        this.partialBytes += end - from;
      } else {
        const line =
          this.partialBytes === 0 ? chunk.subarray(from, end + 1) : this.joined(chunk.subarray(from, end + 1));
        if (this.keeps(line)) kept.push(line);
      }
      if (newline < 0) break;
      from = newline + 1;
    }
    return kept;
  }

  /** At the end of the page: an unterminated last line is counted, never kept. */
  end(): void {
    if (this.partialBytes > 0) this.counts.malformed++;
    this.dropPartial();
  }

  private joined(rest: Buffer): Buffer {
    const line = Buffer.concat([...this.partial, rest]);
    this.dropPartial();
    return line;
  }

  private dropPartial(): void {
    this.partial = [];
    this.partialBytes = 0;
  }

  /** `line` ends with its newline. */
  private keeps(line: Buffer): boolean {
    // latin1: one char a byte, and names are ASCII; label values pass through as bytes.
    const text = line.toString("latin1", 0, line.length - 1);
    if (text.trim() === "") return false;
    if (text.startsWith("#")) {
      const m = FAMILY_COMMENT.exec(text);
      if (!m) {
        if (/^#[ \t]+(?:HELP|TYPE)\b/.test(text)) this.counts.malformed++;
        return false;
      }
      if (!METRIC_NAME.test(m[1]!)) {
        this.counts.malformed++;
        this.family = null;
        return false;
      }
      this.family = m[1]!;
      return this.families.has(this.family);
    }
    const m = SAMPLE.exec(text);
    if (!m || !METRIC_NAME.test(m[1]!)) {
      this.counts.malformed++;
      return false;
    }
    return this.families.has(this.familyOf(m[1]!));
  }

  private familyOf(sample: string): string {
    const f = this.family;
    if (f !== null && (sample === f || FAMILY_SUFFIXES.some((s) => sample === f + s))) return f;
    return sample;
  }
}

/** The filter as a stream: text in, the kept lines out; `counts` once it has ended. */
export function familyFilterStream(
  families: ReadonlySet<string>,
  maxLineBytes = MAX_LINE_BYTES,
): Transform & { counts: FilterCounts } {
  const filter = new FamilyFilter(families, maxLineBytes);
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      const kept = filter.write(chunk);
      done(null, kept.length === 0 ? undefined : Buffer.concat(kept));
    },
    flush(done: TransformCallback) {
      filter.end();
      done();
    },
  });
  return Object.assign(stream, { counts: filter.counts });
}
