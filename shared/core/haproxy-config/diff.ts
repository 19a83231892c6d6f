/*
 * Decides whether a new HAProxy config can be applied through the runtime API
 * (`set server ... addr/state`, `add server`) instead of a reload. Pure: two parsed configs
 * (parse.ts) in, verdict out; it compares what HAProxy parses of each (`head`), the file sections
 * being compared file by file (pattern-files.ts diffPatternFiles).
 *
 * It relies on the exact server line our templates produce, inside `backend` sections
 * (server-line.ts). Anything it does not recognise must be byte-identical, so an unexpected shape can only
 * cost a reload, never a wrong runtime change. The one kind of line that may be new: server
 * lines appended to a backend's servers (a backend that grew, core/model/slots.ts), when HAProxy 2.6
 * can add them at runtime — a dynamic algorithm, no cookie, and `default-server` parameters that
 * `add server` takes (it does not read `default-server`, so the agent passes them itself).
 */

import { describeValue } from "../describe-value.js";
import type { HaproxyConfig } from "./parse.js";
import { parseServer, type ServerLine, SERVER_PREFIX, type SlotState, sectionOf } from "./server-line.js";

export type { SlotState } from "./server-line.js";

export interface ServerChange {
  backend: string;
  server: string;
  from: SlotState;
  to: SlotState;
}

/** A server line the new config appends to a backend, with the backend's `default-server` parameters. */
export interface ServerAdd {
  backend: string;
  server: string;
  to: SlotState;
  /** What `add server` is to be given beside the address: the backend's `default-server` parameters. */
  params: string;
}

/** A slot that is `disabled` and unchanged in both configs, or added free: free to carry an endpoint for a moment. */
export interface SpareSlot extends SlotState {
  server: string;
}

export type ConfigDiff =
  | { kind: "identical" }
  /**
   * `spare`: for each backend with changes, its slots free before and after (in config order).
   * `emptied`: the backends with changes or adds that the new config leaves with no enabled server.
   */
  | {
      kind: "runtime";
      changes: ServerChange[];
      adds: ServerAdd[];
      spare: Map<string, SpareSlot[]>;
      emptied: Set<string>;
    }
  | { kind: "reload"; reason: string };

/** How much of a differing line a reason quotes. */
const LINE_CHARS = 100;

/** A free slot's line: `disabled` and nothing after it (cheap test first: most lines are not). */
function spareOf(line: string): SpareSlot | undefined {
  if (!line.endsWith(" disabled") || !line.startsWith(SERVER_PREFIX)) return undefined;
  const s = parseServer(line);
  return s && !s.enabled ? { server: s.server, address: s.address, port: s.port, enabled: false } : undefined;
}

/**
 * `default-server` keywords our templates write (core/render/render.ts serverParams) that HAProxy 2.6's
 * `add server` accepts with their values. `check` is not among them: a checked server holds a
 * descriptor, which only the agent's check stage counts.
 */
const ADDABLE_PARAMS = new Map<string, number>([
  ["maxconn", 1],
  ["proto", 1],
  ["ssl", 0],
  ["verify", 1],
  ["sni", 1],
  ["alpn", 1],
  ["send-proxy", 0],
  ["send-proxy-v2", 0],
]);
const DYNAMIC_ALGORITHMS = new Set(["roundrobin", "leastconn", "first"]);

/** What a backend's lines before its servers say about adding servers at runtime. */
interface BackendFacts {
  algorithm: string | null;
  cookie: boolean;
  params: string;
}

function noteFact(facts: BackendFacts, line: string): void {
  if (line.startsWith("    balance ")) facts.algorithm = line.slice(12);
  else if (line.startsWith("    cookie ")) facts.cookie = true;
  else if (line.startsWith("    default-server ")) facts.params = line.slice(19);
}

/** Why HAProxy 2.6 cannot add a server to this backend at runtime, or null when it can. */
function cannotAdd(facts: BackendFacts, added: ServerLine): string | null {
  if (facts.algorithm === null || !DYNAMIC_ALGORITHMS.has(facts.algorithm))
    return `it balances by ${facts.algorithm ?? "no stated algorithm"}, not a dynamic algorithm`;
  if (facts.cookie) return "it sets cookies, which add server does not take";
  if (added.params !== "") return `the server line has parameters (${added.params.trim()})`;
  const words = facts.params.split(" ").filter((w) => w !== "");
  for (let k = 0; k < words.length; k++) {
    const values = ADDABLE_PARAMS.get(words[k]!);
    if (values === undefined) return `its default-server has ${words[k]}, which the agent does not add at runtime`;
    for (let v = 0; v < values; v++)
      if (!/^[A-Za-z0-9_.:/()-]+$/.test(words[++k] ?? "")) return "its default-server has an unexpected value";
  }
  return null;
}

export function diffConfigs(from: HaproxyConfig, to: HaproxyConfig): ConfigDiff {
  const oldText = from.head;
  const newText = to.head;
  if (oldText === newText) return { kind: "identical" };
  const { start, oldEnd, newEnd } = differingSections(oldText, newText);
  // Reasons name lines of the whole config; the lines before the region are counted only for one.
  let before: number | undefined;
  const lineNo = (i: number) => {
    before ??= lineCount(oldText, start);
    return before + i + 1;
  };
  const diff = walkLines(
    oldText.slice(start, oldEnd).split("\n"),
    newText.slice(start, newEnd).split("\n"),
    lineNo,
    true,
  );
  // Lines added or removed other than a backend's new servers: a reload, whichever line says so.
  // The whole configs are paired line by line so that the reason names the same line as always.
  return diff !== "misaligned"
    ? diff
    : (walkLines(oldText.split("\n"), newText.split("\n"), (i) => i + 1, false) as ConfigDiff);
}

/**
 * Pairs the lines of both configs. `adding`: a server line appended to a backend's servers is an
 * add, and any other line added or removed makes the walk "misaligned"; else lines pair by index
 * and the first one past either end is the reload's reason.
 */
function walkLines(
  a: readonly string[],
  b: readonly string[],
  lineNo: (i: number) => number,
  adding: boolean,
): ConfigDiff | "misaligned" {
  const changes: ServerChange[] = [];
  const adds: ServerAdd[] = [];
  const spare = new Map<string, SpareSlot[]>();
  const emptied = new Set<string>();
  // Lines before any difference are identical, so both sides are always in the same section.
  let backend: string | null = null;
  let facts: BackendFacts = { algorithm: null, cookie: false, params: "" };
  // The current backend's free slots; kept only if the backend has changes.
  let spareHere: SpareSlot[] = [];
  // Whether the current backend has an enabled server in the new config.
  let enabledHere = false;
  let changesBefore = 0;
  let addsBefore = 0;
  let previousWasServer = false;
  const closeSection = () => {
    if (backend !== null && changes.length > changesBefore) spare.set(backend, spareHere);
    if (backend !== null && (changes.length > changesBefore || adds.length > addsBefore) && !enabledHere)
      emptied.add(backend);
    spareHere = [];
    enabledHere = false;
    changesBefore = changes.length;
    addsBefore = adds.length;
  };
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const oldLine = a[i];
    const newLine = b[j];
    if (oldLine !== undefined && oldLine === newLine) {
      const s = sectionOf(oldLine);
      if (s !== undefined) {
        closeSection();
        backend = s;
        facts = { algorithm: null, cookie: false, params: "" };
      } else if (backend !== null) {
        noteFact(facts, oldLine);
        const free = spareOf(oldLine);
        if (free) spareHere.push(free);
        else if (!enabledHere && oldLine.startsWith(SERVER_PREFIX))
          enabledHere = parseServer(oldLine)?.enabled === true;
      }
      previousWasServer = oldLine.startsWith(SERVER_PREFIX);
      i++;
      j++;
      continue;
    }
    // A server line after the backend's last one, where the old config's servers end.
    const added =
      adding && backend !== null && previousWasServer && newLine !== undefined ? parseServer(newLine) : undefined;
    if (added && (oldLine === undefined || !oldLine.startsWith(SERVER_PREFIX))) {
      const why = cannotAdd(facts, added);
      if (why !== null)
        return {
          kind: "reload",
          reason: `server ${backend}/${added.server} is new and cannot be added at runtime: ${why}`,
        };
      enabledHere ||= added.enabled;
      adds.push({
        backend: backend!,
        server: added.server,
        to: { address: added.address, port: added.port, enabled: added.enabled },
        params: facts.params,
      });
      // Added first (runtime-plan.ts), a new free slot can carry a moving endpoint like any other.
      if (!added.enabled && added.params === "")
        spareHere.push({ server: added.server, address: added.address, port: added.port, enabled: false });
      j++;
      continue;
    }
    const before = oldLine === undefined ? undefined : parseServer(oldLine);
    const after = newLine === undefined ? undefined : parseServer(newLine);
    const pairs =
      backend !== null && before && after && before.server === after.server && before.params === after.params;
    // A line added or removed, not a server line changed in place.
    if (!pairs && adding && a.length - i !== b.length - j) return "misaligned";
    if (oldLine === undefined)
      return { kind: "reload", reason: `line ${lineNo(i)} added: ${describeValue(newLine!, LINE_CHARS)}` };
    if (newLine === undefined)
      return { kind: "reload", reason: `line ${lineNo(i)} removed: ${describeValue(oldLine, LINE_CHARS)}` };
    if (backend === null || !before || !after)
      return {
        kind: "reload",
        reason: `line ${lineNo(i)} differs: ${describeValue(oldLine, LINE_CHARS)} -> ${describeValue(newLine, LINE_CHARS)}`,
      };
    if (before.server !== after.server)
      return {
        kind: "reload",
        reason: `line ${lineNo(i)}: server ${backend}/${before.server} replaced by ${after.server}`,
      };
    if (before.params !== after.params) {
      return {
        kind: "reload",
        reason: `line ${lineNo(i)}: server ${backend}/${before.server} parameters changed: ${describeValue(before.params.trim(), 60)} -> ${describeValue(after.params.trim(), 60)}`,
      };
    }
    enabledHere ||= after.enabled;
    changes.push({
      backend,
      server: after.server,
      from: { address: before.address, port: before.port, enabled: before.enabled },
      to: { address: after.address, port: after.port, enabled: after.enabled },
    });
    previousWasServer = true;
    i++;
    j++;
  }
  closeSection();
  return { kind: "runtime", changes, adds, spare, emptied };
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
