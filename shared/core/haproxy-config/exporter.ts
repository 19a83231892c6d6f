/*
 * Where HAProxy's Prometheus exporter answers, read from the config it runs: the section that
 * serves `http-request use-service prometheus-exporter` (the stats listener of our template), its
 * first `bind` and the path of its `{ path … }` condition. The agent fetches it from inside the
 * node, so an address of every interface (`*`, 0.0.0.0, [::]) is asked on loopback; an address
 * HAProxy takes from its environment is read with the one it runs with (environment.ts). A config
 * whose exporter is written otherwise (a custom template) has none found: the agent says so.
 * Pure: text in, value out.
 */

import { expandWord, type HaproxyEnv } from "./environment.js";

export interface ExporterAddress {
  /** An IPv4 address, or an IPv6 address in brackets. */
  host: string;
  port: number;
  path: string;
}

const USE_SERVICE = /^[ \t]+http-request[ \t]+use-service[ \t]+prometheus-exporter\b(.*)$/m;
const PATH_CONDITION = /^[ \t]+if[ \t]+\{[ \t]*path[ \t]+(\/\S*)[ \t]*\}[ \t]*$/;
const BIND = /^[ \t]+bind[ \t]+(\S*):([0-9]{1,5})(?:[ \t]|$)/m;
const ADDRESS = /^(\*|[0-9.]{7,15}|\[[0-9a-fA-F:.]{2,45}\]|)$/;
/** Lines at column 0 that are not comments: section headers. */
const HEADERS = /^[^\s#]/gm;
const NEXT_HEADER = /\n[^\s#]/;

const LOOPBACK: Record<string, string> = { "": "127.0.0.1", "*": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::]": "[::1]" };

export function exporterOf(text: string, env: HaproxyEnv): ExporterAddress | undefined {
  const use = USE_SERVICE.exec(text);
  if (!use) return undefined;
  const condition = use[1]!;
  let path = "/metrics";
  if (condition.trim() !== "") {
    const p = PATH_CONDITION.exec(condition);
    if (!p) return undefined;
    path = p[1]!;
  }
  const section = sectionAround(text, use.index);
  const bind = BIND.exec(section);
  if (!bind) return undefined;
  const host = expandWord(bind[1]!, env);
  const port = Number(bind[2]);
  if (!ADDRESS.test(host) || port < 1 || port > 65535) return undefined;
  return { host: LOOPBACK[host] ?? host, port, path };
}

/** The lines of the section holding offset `at`, from its header to the next one. */
function sectionAround(text: string, at: number): string {
  let start = 0;
  for (const header of text.slice(0, at).matchAll(HEADERS)) start = header.index;
  const next = NEXT_HEADER.exec(text.slice(at));
  return text.slice(start, next ? at + next.index + 1 : text.length);
}
