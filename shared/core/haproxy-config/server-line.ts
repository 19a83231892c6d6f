/*
 * The lines of a backend section the agent reads and changes: the section headers and the server
 * lines our templates write (templates/server.liquid, placed by core/render/render.ts):
 *
 *   backend <name>[ from <defaults>]
 *       server <slot> <ipv4>|[<ipv6>]:<port>[ disabled][ <params>]
 *
 * A free slot is `disabled` at FREE_SLOT_ADDRESS, so HAProxy never sends to it. Anything else is
 * not a server line to the agent (it then costs a reload, never a wrong runtime change).
 * Pure: a line in, its parts out.
 */

/** Placeholder address of a free server slot; it is `disabled`, so HAProxy never sends to it. */
export const FREE_SLOT_ADDRESS = "127.0.0.1:1";

/** Where a backend section starts: the tree digest (core/publish/tree-digest.ts) cuts a config before each. */
export const BACKEND_CUT = "\nbackend ";

/** What a server line says of its slot. */
export interface SlotState {
  /** Bare address, without IPv6 brackets (what `set server ... addr` takes). */
  address: string;
  port: number;
  /** false: the line says `disabled` (the slot is in maintenance). */
  enabled: boolean;
}

export interface ServerLine extends SlotState {
  server: string;
  /** Everything after the address and `disabled`, with its leading space ("" when none). */
  params: string;
}

const SERVER_LINE = /^ {4}server (\S+) (\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]):(\d{1,5})( disabled)?((?: \S+)*)$/;
const BACKEND_HEADER = /^backend (\S+)(?: from \S+)?$/;

/** What every server line starts with; a cheap test before the grammar's. */
export const SERVER_PREFIX = "    server ";

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

/** The section a column-0 line opens: a backend's name, or null for any other section; undefined for any other line. */
export function sectionOf(line: string): string | null | undefined {
  if (line === "" || /^[\s#]/.test(line)) return undefined;
  return BACKEND_HEADER.exec(line)?.[1] ?? null;
}

/** `ip:port` or `[ipv6]:port`, as a server line and the model write a slot's address. */
export function hostPort(address: string, port: number): string {
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}
