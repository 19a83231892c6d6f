/*
 * Facts the agent reads from a rendered config's text: where its runtime API socket and
 * server-state file are, and each server slot's address. Our templates put one directive per
 * line, indented four spaces; anything else is simply not found (and costs a reload, never a
 * wrong action). Paths are as written: a relative one means the same file to HAProxy and to the
 * agent, which run in one working directory.
 */

import { parseServer, sectionOf } from "./config-diff.js";

/**
 * The value of the first `keyword` line of a global section. Only global sections are read: found by a native
 * search for their header lines, not a walk over every line (a config of 10,000 Services has
 * 200,000, and the agent asks for these facts at every apply).
 */
export function globalSetting(text: string, keyword: string): string | undefined {
  const setting = new RegExp(`^\\s+${keyword}\\s+(\\S+)`);
  for (const header of text.matchAll(GLOBAL_HEADER)) {
    let from = header.index + header[0].length + 1;
    while (from < text.length) {
      const newline = text.indexOf("\n", from);
      const line = text.slice(from, newline < 0 ? text.length : newline);
      // A line at column 0 opens the next section (a comment there does not).
      if (/^\S/.test(line) && !line.startsWith("#")) break;
      const m = setting.exec(line);
      if (m) return m[1]!;
      if (newline < 0) break;
      from = newline + 1;
    }
  }
  return undefined;
}

/** A `global` section's header line (trailing blanks allowed, as `line.trim()` allowed them). */
const GLOBAL_HEADER = /^global[^\S\n]*$/gm;

/** `stats socket <path>` of the global section: the runtime API. */
export function statsSocketOf(text: string): string | undefined {
  return globalSetting(text, "stats socket");
}

/** `server-state-file <path>`: HAProxy loads it when it (re)starts. */
export function serverStateFileOf(text: string): string | undefined {
  return globalSetting(text, "server-state-file");
}

/** Where a server slot of a rendered config points. */
export interface SlotAddress {
  address: string;
  port: number;
}

/** "backend/server" → its address (bare, without IPv6 brackets) and port, for every backend server line. */
export function serverSlotsOf(text: string): Map<string, SlotAddress> {
  const slots = new Map<string, SlotAddress>();
  let backend: string | null = null;
  for (const line of text.split("\n")) {
    const section = sectionOf(line);
    if (section !== undefined) {
      backend = section;
      continue;
    }
    const server = backend === null ? undefined : parseServer(line);
    if (server) slots.set(`${backend}/${server.server}`, { address: server.address, port: server.port });
  }
  return slots;
}
