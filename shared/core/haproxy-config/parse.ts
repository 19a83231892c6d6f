/*
 * A published config parsed once into the value the agent decides on: the part HAProxy parses
 * (`head`), the files of its file section (pattern files, route maps, the Service map:
 * pattern-files.ts), the global settings the agent acts on (the runtime API's socket, the
 * server-state file: globals.ts) and each backend's server lines (server-line.ts). The decision
 * (agent/decide.ts, diff.ts), the files written (agent/config-files.ts), the server states kept
 * across a reload (server-state.ts) and the metrics' series (agent/service-series.ts) all read
 * this value, never the text again.
 *
 * Every line of the file section is validated while parsing (unless the config parsed before has
 * the same section: its files were validated then); the rest is read on first use only, once: the
 * global settings (a search of the whole text) and the backends (a walk over every line: 200,000
 * at 10,000 Services, which an apply through the runtime API never needs). The agent parses each
 * config once (configParser): an apply parses the running config and the new one, and the new one
 * is the running one of the next apply.
 * Pure: text in, value out.
 */

import type { HaproxyEnv } from "./environment.js";
import { serverStateFileOf, statsSocketOf } from "./globals.js";
import { splitConfig } from "./pattern-files.js";
import { parseServer, type ServerLine, sectionOf } from "./server-line.js";

export interface HaproxyConfig {
  /** The whole config as published. */
  readonly text: string;
  /** What HAProxy parses: everything before the file section (the whole text when there is none). */
  readonly head: string;
  /** The file section's files by path, in the section's order: each file's lines. */
  readonly files: ReadonlyMap<string, readonly string[]>;
  /** `stats socket` of a global section: the runtime API. */
  readonly statsSocket: string | undefined;
  /** `server-state-file` of a global section: HAProxy loads it when it (re)starts. */
  readonly serverStateFile: string | undefined;
  /** Every backend section by name, in config order, with its server lines in order. */
  readonly backends: ReadonlyMap<string, readonly ServerLine[]>;
}

/** A config whose file section is not one: why, and its text. */
export interface UnparsedConfig {
  readonly text: string;
  readonly error: string;
}

export type ParsedConfig = HaproxyConfig | UnparsedConfig;

class Parsed implements HaproxyConfig {
  private read: Map<string, ServerLine[]> | undefined;
  private socket: { path: string | undefined } | undefined;
  private stateFile: { path: string | undefined } | undefined;

  constructor(
    readonly text: string,
    readonly head: string,
    readonly files: ReadonlyMap<string, readonly string[]>,
    private readonly env: HaproxyEnv,
  ) {}

  // Each read on first use, once: a search of the whole head for its global sections.
  get statsSocket(): string | undefined {
    this.socket ??= { path: statsSocketOf(this.head, this.env) };
    return this.socket.path;
  }

  get serverStateFile(): string | undefined {
    this.stateFile ??= { path: serverStateFileOf(this.head, this.env) };
    return this.stateFile.path;
  }

  get backends(): ReadonlyMap<string, readonly ServerLine[]> {
    this.read ??= backendsOf(this.head);
    return this.read;
  }
}

/**
 * The config's value, or why its file section is not one (every path and line is checked); its
 * paths as HAProxy reads them with `env`, the environment it runs with.
 */
export function parseConfig(text: string, env: HaproxyEnv = {}, known?: HaproxyConfig): ParsedConfig {
  const split = splitConfig(text, known);
  return "error" in split ? { text, error: split.error } : new Parsed(text, split.head, split.files, env);
}

function backendsOf(head: string): Map<string, ServerLine[]> {
  const backends = new Map<string, ServerLine[]>();
  let servers: ServerLine[] | undefined;
  for (const line of head.split("\n")) {
    const section = sectionOf(line);
    if (section !== undefined) {
      servers = section === null ? undefined : [];
      if (section !== null) backends.set(section, servers!);
      continue;
    }
    const server = servers === undefined ? undefined : parseServer(line);
    if (server) servers!.push(server);
  }
  return backends;
}

/** A slot's server line by "backend/server", for every backend server line. */
export function serverSlots(config: HaproxyConfig): Map<string, ServerLine> {
  const slots = new Map<string, ServerLine>();
  for (const [backend, servers] of config.backends) for (const s of servers) slots.set(`${backend}/${s.server}`, s);
  return slots;
}

export type ConfigParser = (text: string) => ParsedConfig;

/** How many parsed configs a parser keeps: the running one and the new one. */
const KEPT = 2;

/** parseConfig, each text parsed once while it is one of the newest two (keyed by the text itself). */
export function configParser(env: HaproxyEnv): ConfigParser {
  const recent: Array<{ text: string; parsed: ParsedConfig }> = [];
  return (text) => {
    const hit = recent.find((r) => r.text === text);
    if (hit) return hit.parsed;
    // The newest config parsed lends its files when its file section is the same (splitConfig).
    const known = recent.map((r) => r.parsed).find((p): p is HaproxyConfig => !("error" in p));
    const parsed = parseConfig(text, env, known);
    recent.unshift({ text, parsed });
    recent.length = Math.min(recent.length, KEPT);
    return parsed;
  };
}
