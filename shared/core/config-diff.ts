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
  const a = oldText.split("\n");
  const b = newText.split("\n");
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
    const n = i + 1;
    if (oldLine === undefined) return { kind: "reload", reason: `line ${n} added: ${show(newLine!)}` };
    if (newLine === undefined) return { kind: "reload", reason: `line ${n} removed: ${show(oldLine)}` };
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
      return { kind: "reload", reason: `line ${n} differs: ${show(oldLine)} -> ${show(newLine)}` };
    if (before.server !== after.server)
      return { kind: "reload", reason: `line ${n}: server ${backend}/${before.server} replaced by ${after.server}` };
    if (before.params !== after.params) {
      return {
        kind: "reload",
        reason: `line ${n}: server ${backend}/${before.server} parameters changed: ${show(before.params.trim(), 60)} -> ${show(after.params.trim(), 60)}`,
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
