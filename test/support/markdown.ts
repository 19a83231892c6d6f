/*
 * Just enough Markdown for the tests that hold the documents to the code: headings and their
 * anchors (GitHub's rule), the text under a heading, and the cells of its tables.
 */

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/ /g, "-");
}

/** Heading lines outside code fences, as level and text. */
export function headings(markdown: string): { level: number; text: string }[] {
  const out: { level: number; text: string }[] = [];
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^(#{1,6}) (.+)$/.exec(line);
    if (m) out.push({ level: m[1]!.length, text: m[2]!.trim() });
  }
  return out;
}

export function anchors(markdown: string): Set<string> {
  return new Set(headings(markdown).map((h) => slug(h.text)));
}

/**
 * The text under the heading whose anchor is `anchor`, up to the next heading of its level or
 * above; with `ownTextOnly`, up to the next heading of any level (its subsections left out).
 */
export function section(markdown: string, anchor: string, ownTextOnly = false): string {
  const lines = markdown.split("\n");
  let level = 0;
  let start = -1;
  let fenced = false;
  for (const [i, line] of lines.entries()) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^(#{1,6}) (.+)$/.exec(line);
    if (!m) continue;
    if (start >= 0 && (ownTextOnly || m[1]!.length <= level)) return lines.slice(start, i).join("\n");
    if (start < 0 && slug(m[2]!) === anchor) {
      level = m[1]!.length;
      start = i + 1;
    }
  }
  if (start < 0) throw new Error(`no heading #${anchor}`);
  return lines.slice(start).join("\n");
}

/** The cells of every table row in `text` (header and rule rows excluded), `\|` kept as `|`. */
export function tableRows(text: string): string[][] {
  const rows: string[][] = [];
  for (const block of text.split(/\n(?!\|)/)) {
    const lines = block.split("\n").filter((l) => l.startsWith("|"));
    for (const line of lines.slice(2)) {
      rows.push(
        line
          .slice(1, -1)
          .split(/(?<!\\)\|/)
          .map((c) => c.trim().replaceAll("\\|", "|")),
      );
    }
  }
  return rows;
}

/** Every `code span` in a cell. */
export function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
}
