/*
 * Settings of a config's global sections the agent and the publisher read: where the runtime API
 * socket and the server-state file are (parse.ts), and what counts descriptors
 * (core/model/descriptors.ts). Our templates put one directive per line, indented four spaces; anything
 * else is simply not found (and costs a reload, never a wrong action). Paths are read as HAProxy
 * reads them, with the environment the agent gives it (environment.ts); a relative one means the
 * same file to HAProxy and to the agent, which run in one working directory.
 */

import { expandWord, type HaproxyEnv } from "./environment.js";

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
export function statsSocketOf(text: string, env: HaproxyEnv): string | undefined {
  const word = globalSetting(text, "stats socket");
  return word === undefined ? undefined : expandWord(word, env);
}

/** `server-state-file <path>`: HAProxy loads it when it (re)starts. */
export function serverStateFileOf(text: string, env: HaproxyEnv): string | undefined {
  const word = globalSetting(text, "server-state-file");
  return word === undefined ? undefined : expandWord(word, env);
}
