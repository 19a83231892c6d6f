/*
 * The body of a config published in chunks (`chunks1`, see content-chunks.ts): a manifest that
 * names the config's chunks in order, then the bytes of the chunks it carries inline — those the
 * config before it did not have, so that an agent running that config gets the change in the one
 * GET of the config's object. Every other chunk is its own object, chunks/<name>. The assembled
 * config is what the config's digest (tree1) is over; the manifest is only how to assemble it.
 *
 *   servicelb chunks1 <chunks> <inline bytes>\n
 *   <name: 64 hex> <bytes> <i: inline | -: its own object>\n    one line per chunk, in order
 *   <the inline chunks' bytes, in order>
 */

export interface ManifestEntry {
  name: string;
  size: number;
  inline: boolean;
}

export interface ChunkedBody {
  entries: ManifestEntry[];
  /** The inline chunks' bytes, back to back in manifest order. */
  inline: Buffer;
}

const HEADER = /^servicelb chunks1 (\d{1,9}) (\d{1,12})$/;
const ENTRY = /^([0-9a-f]{64}) (\d{1,9}) ([i-])$/;

export function formatChunkedBody(entries: readonly ManifestEntry[], inline: readonly Buffer[]): Buffer {
  const inlineBytes = inline.reduce((n, b) => n + b.length, 0);
  const lines = [`servicelb chunks1 ${entries.length} ${inlineBytes}`];
  for (const e of entries) lines.push(`${e.name} ${e.size} ${e.inline ? "i" : "-"}`);
  return Buffer.concat([Buffer.from(`${lines.join("\n")}\n`, "latin1"), ...inline]);
}

/** The manifest and inline bytes of a chunked body; an Error that says what is wrong otherwise. */
export function parseChunkedBody(body: Buffer): ChunkedBody {
  let at = body.indexOf(0x0a);
  const header = HEADER.exec(at < 0 ? "" : body.toString("latin1", 0, at));
  if (!header) throw new Error("not a chunks1 manifest (no header line)");
  const count = Number(header[1]);
  const inlineBytes = Number(header[2]);
  const entries: ManifestEntry[] = [];
  let inlineSum = 0;
  for (let i = 0; i < count; i++) {
    const from = at + 1;
    at = body.indexOf(0x0a, from);
    const m = ENTRY.exec(at < 0 ? "" : body.toString("latin1", from, at));
    if (!m) throw new Error(`manifest entry ${i + 1} of ${count} is not "<sha256> <bytes> <i|->"`);
    const entry = { name: m[1]!, size: Number(m[2]), inline: m[3] === "i" };
    if (entry.inline) inlineSum += entry.size;
    entries.push(entry);
  }
  const inline = body.subarray(at + 1);
  if (inline.length !== inlineBytes || inlineSum !== inlineBytes)
    throw new Error(
      `the manifest's inline chunks are ${inlineSum} bytes, its header says ${inlineBytes}, and ${inline.length} follow`,
    );
  return { entries, inline };
}
