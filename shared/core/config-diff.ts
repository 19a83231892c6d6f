/*
 * Decides whether a new HAProxy config can be applied through the runtime API
 * (`set server ... addr/state`) instead of a reload. Pure: text in, verdict out.
 *
 * It relies on the exact server line our templates produce, inside `backend` sections:
 *   "    server <slot> <ipv4>|[<ipv6>]:<port>[ disabled][ <params>]"
 * Anything it does not recognise must be byte-identical, so an unexpected shape can only
 * cost a reload, never a wrong runtime change.
 */

export interface SlotState {
  /** Bare address, without IPv6 brackets (what `set server ... addr` takes). */
  address: string;
  port: number;
  /** false: the line says `disabled` (the slot is in maintenance). */
  enabled: boolean;
}

export interface ServerChange {
  backend: string;
  server: string;
  from: SlotState;
  to: SlotState;
}

/** A slot that is `disabled` and unchanged in both configs: free to carry an endpoint for a moment. */
export interface SpareSlot extends SlotState {
  server: string;
}

export type ConfigDiff =
  | { kind: "identical" }
  /** `spare`: for each backend with changes, its slots free before and after (in config order). */
  | { kind: "runtime"; changes: ServerChange[]; spare: Map<string, SpareSlot[]> }
  | { kind: "reload"; reason: string };

interface ServerLine {
  server: string;
  address: string;
  port: number;
  enabled: boolean;
  params: string;
}

const SERVER_LINE = /^ {4}server (\S+) (\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]):(\d{1,5})( disabled)?((?: \S+)*)$/;
const BACKEND_HEADER = /^backend (\S+)(?: from \S+)?$/;

/** A server line in our templates' exact shape, or undefined. */
export function parseServer(line: string): ServerLine | undefined {
  const m = SERVER_LINE.exec(line);
  if (!m) return undefined;
  return {
    server: m[1]!,
    address: m[2]!.replace(/^\[(.*)\]$/, "$1"),
    port: Number(m[3]),
    enabled: m[4] === undefined,
    params: m[5]!,
  };
}

/** The section a column-0 line opens: a backend's name, or null for any other section. */
export function sectionOf(line: string): string | null | undefined {
  if (line === "" || /^[\s#]/.test(line)) return undefined;
  return BACKEND_HEADER.exec(line)?.[1] ?? null;
}

function show(line: string, max = 100): string {
  return JSON.stringify(line.length > max ? `${line.slice(0, max)}…` : line);
}

/** A free slot's line: `disabled` and nothing after it (cheap test first: most lines are not). */
function spareOf(line: string): SpareSlot | undefined {
  if (!line.endsWith(" disabled") || !line.startsWith("    server ")) return undefined;
  const s = parseServer(line);
  return s && !s.enabled ? { server: s.server, address: s.address, port: s.port, enabled: false } : undefined;
}

export function diffConfigs(oldText: string, newText: string): ConfigDiff {
  if (oldText === newText) return { kind: "identical" };
  let { start, oldEnd, newEnd } = differingSections(oldText, newText);
  let a = oldText.slice(start, oldEnd).split("\n");
  let b = newText.slice(start, newEnd).split("\n");
  if (a.length !== b.length) {
    // Lines added or removed: a reload, whichever line says so. The whole configs are compared so
    // that the reason names the same line as always (past the region, lines no longer pair up).
    start = 0;
    a = oldText.split("\n");
    b = newText.split("\n");
  }
  // Reasons name lines of the whole config; the lines before the region are counted only for one.
  const lineNo = (i: number) => lineCount(oldText, start) + i + 1;
  const changes: ServerChange[] = [];
  const spare = new Map<string, SpareSlot[]>();
  // Lines before any difference are identical, so both sides are always in the same section.
  let backend: string | null = null;
  // The current backend's free slots; kept only if the backend has changes.
  let spareHere: SpareSlot[] = [];
  let changesBefore = 0;
  const closeSection = () => {
    if (backend !== null && changes.length > changesBefore) spare.set(backend, spareHere);
    spareHere = [];
    changesBefore = changes.length;
  };
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const oldLine = a[i];
    const newLine = b[i];
    if (oldLine === undefined) return { kind: "reload", reason: `line ${lineNo(i)} added: ${show(newLine!)}` };
    if (newLine === undefined) return { kind: "reload", reason: `line ${lineNo(i)} removed: ${show(oldLine)}` };
    if (oldLine === newLine) {
      const s = sectionOf(oldLine);
      if (s !== undefined) {
        closeSection();
        backend = s;
      } else if (backend !== null) {
        const free = spareOf(oldLine);
        if (free) spareHere.push(free);
      }
      continue;
    }
    const before = parseServer(oldLine);
    const after = parseServer(newLine);
    if (backend === null || !before || !after)
      return { kind: "reload", reason: `line ${lineNo(i)} differs: ${show(oldLine)} -> ${show(newLine)}` };
    if (before.server !== after.server)
      return {
        kind: "reload",
        reason: `line ${lineNo(i)}: server ${backend}/${before.server} replaced by ${after.server}`,
      };
    if (before.params !== after.params) {
      return {
        kind: "reload",
        reason: `line ${lineNo(i)}: server ${backend}/${before.server} parameters changed: ${show(before.params.trim(), 60)} -> ${show(after.params.trim(), 60)}`,
      };
    }
    changes.push({
      backend,
      server: after.server,
      from: { address: before.address, port: before.port, enabled: before.enabled },
      to: { address: after.address, port: after.port, enabled: after.enabled },
    });
  }
  closeSection();
  return { kind: "runtime", changes, spare };
}

/**
 * The smallest run of whole sections that holds every difference: the same offset `start` in
 * both texts (a line that opens a section, or 0), and ends (`oldEnd`, `newEnd`) from which the
 * rest is the same bytes in both, starting with a line that opens a section (or the end). Only
 * these sections need a walk line by line: an endpoint moved in one backend of 10,000 is a walk
 * over that backend, not over 200,000 lines of both configs.
 */
function differingSections(a: string, b: string): { start: number; oldEnd: number; newEnd: number } {
  const prefix = commonPrefixLength(a, b);
  const suffix = commonSuffixLength(a, b, Math.min(a.length, b.length) - prefix);
  let start = lineStart(a, prefix);
  while (start > 0 && sectionOf(lineAt(a, start)) === undefined) start = lineStart(a, start - 1);
  // The first line that starts inside the common suffix: from there on, lines are the same in both.
  const firstCommon = a.length - suffix;
  const newline = a.indexOf("\n", firstCommon);
  let end = newline < 0 ? a.length : newline + 1;
  while (end < a.length && sectionOf(lineAt(a, end)) === undefined) {
    const next = a.indexOf("\n", end);
    end = next < 0 ? a.length : next + 1;
  }
  return { start, oldEnd: end, newEnd: end + b.length - a.length };
}

/** The start of the line that holds offset `i` (a newline belongs to the line it ends). */
function lineStart(text: string, i: number): number {
  return i <= 0 ? 0 : text.lastIndexOf("\n", i - 1) + 1;
}

function lineAt(text: string, from: number): string {
  const end = text.indexOf("\n", from);
  return text.slice(from, end < 0 ? text.length : end);
}

/** Block sizes for comparing texts: large ones to skip what is equal, small ones to find where it stops. */
const BLOCKS = [65536, 4096, 256, 16, 1];

/** How many leading characters `a` and `b` share (compared a block at a time, each block natively). */
function commonPrefixLength(a: string, b: string): number {
  const max = Math.min(a.length, b.length);
  let i = 0;
  for (const size of BLOCKS) while (i + size <= max && a.slice(i, i + size) === b.slice(i, i + size)) i += size;
  return i;
}

/** How many trailing characters `a` and `b` share, at most `max`. */
function commonSuffixLength(a: string, b: string, max: number): number {
  let n = 0;
  for (const size of BLOCKS)
    while (n + size <= max && a.slice(a.length - n - size, a.length - n) === b.slice(b.length - n - size, b.length - n))
      n += size;
  return n;
}

function lineCount(text: string, end: number): number {
  let lines = 0;
  for (let i = text.indexOf("\n"); i >= 0 && i < end; i = text.indexOf("\n", i + 1)) lines++;
  return lines;
}
