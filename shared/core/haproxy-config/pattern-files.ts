/*
 * Pattern files (HAProxy `acl … -f <file>`) and route maps (`map_str(<file>)`, route-maps.ts)
 * carried inside the published config. The config is
 * one object in the store, so the files travel as a section at its very end, in comment lines
 * HAProxy skips:
 *
 *   # servicelb pattern files: …            (PATTERN_SECTION, once)
 *   #> patterns/default.web.allow           (a file, by its path relative to haproxy.cfg)
 *   #| 10.0.0.0/8                            (one line of that file)
 *   #> maps/http.paths.map
 *   #| /web/ default_web_80
 *   #> maps/backends.map                     (service-map.ts: the Service port of each backend)
 *   #| default_web_80 default/web/80
 *   #> maps/gateway.weights.map              (gateway-weights.ts: Gateway API backend weights)
 *   #| 0:1048575 gw:default:web:80
 *   #> maps/gw.8081.prefix.map               (gateway-maps.ts: Gateway API path matches)
 *   #| shop.example/cart/ 0
 *
 * The agent writes each file beside haproxy.cfg before `haproxy -c` and HAProxy read them
 * (PATTERN_PATHS, placed before the backends, makes `-f patterns/…` relative to the config
 * file), and can tell a change confined to the lists, which it applies through the runtime API,
 * from any other.
 * Being last, the section never shifts the line numbers the slot diff (diff.ts) compares.
 * Pure: text in, files out; every path and line is checked here, so nothing unvalidated reaches
 * a file or a runtime command.
 */

import { compareStrings } from "../compare.js";
import { isRouteMapPath, parseMapLine, ROUTE_MAP_DIR } from "./route-maps.js";
import { parseServiceMapLine, SERVICE_MAP } from "./service-map.js";
import { WEIGHTS_MAP, weightLineError } from "./gateway-weights.js";
import { gatewayMapLineError, isGatewayMapPath } from "./gateway-maps.js";
import { MAX_SOURCE_RANGES, parseSource } from "../model/source-ranges.js";

export const PATTERN_SECTION =
  '# servicelb pattern files: the agent writes each "#>" file beside this one with its "#|" lines; HAProxy reads them with -f.';

/**
 * Placed before the backends when there are lists. HAProxy applies `default-path` to the lines
 * after it (it changes directory while parsing), and a second `global` section is allowed: the
 * paths above (certificates, CA, error files) keep resolving as they always did, while the `-f`
 * of every backend resolves beside the config file, the live one's or the check's temporary copy.
 */
export const PATTERN_PATHS = `global
    # The pattern files of allow and deny lists (acl … -f patterns/…) are read beside this file.
    default-path config

`;

/** Directory of the pattern files, relative to haproxy.cfg. */
export const PATTERN_DIR = "patterns";
/** A route map holds a line per route: a few per Service, for clusters far beyond 50,000 Services. */
export const MAX_MAP_LINES = 1_000_000;

/** Every directory a config's files go to, relative to haproxy.cfg. */
export const PATTERN_DIRS = [PATTERN_DIR, ROUTE_MAP_DIR] as const;

/** A file's path: `patterns/<namespace>.<service>.<allow|deny>`; namespaces and Service names hold no dot. */
const PATH = /^patterns\/[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.(allow|deny)$/;

export type PatternKind = "allow" | "deny";

export interface PatternFile {
  /** Relative to haproxy.cfg; also the name HAProxy's runtime API knows the pattern list by. */
  path: string;
  /** One address or CIDR per line, as source-ranges.ts accepts them. */
  entries: readonly string[];
}

/** The published config split: what HAProxy parses and the pattern files it reads. */
export interface SplitConfig {
  /** Everything before the pattern section: the whole config when there is none. */
  head: string;
  /** By path, in the section's order. */
  files: ReadonlyMap<string, readonly string[]>;
}

export function patternFilePath(namespace: string, service: string, kind: PatternKind): string {
  return `${PATTERN_DIR}/${namespace}.${service}.${kind}`;
}

export function isPatternFilePath(path: string): boolean {
  return PATH.test(path) || isMapPath(path);
}

function isMapPath(path: string): boolean {
  return isRouteMapPath(path) || path === SERVICE_MAP || path === WEIGHTS_MAP || isGatewayMapPath(path);
}

/** How HAProxy's runtime API knows the file: `acl` lists addresses, `map` holds `<key> <value>` lines. */
export function patternFileKind(path: string): "acl" | "map" {
  return isMapPath(path) ? "map" : "acl";
}

/** Why `line` cannot be a line of the file at `path`, or null when it can. */
export function patternLineError(path: string, line: string): string | null {
  if (isRouteMapPath(path)) {
    const entry = parseMapLine(path, line);
    return typeof entry === "string" ? `${JSON.stringify(line.slice(0, 60))}: ${entry}` : null;
  }
  if (path === SERVICE_MAP) {
    const entry = parseServiceMapLine(line);
    return typeof entry === "string" ? `${JSON.stringify(line.slice(0, 60))}: ${entry}` : null;
  }
  if (path === WEIGHTS_MAP || isGatewayMapPath(path)) {
    const bad = path === WEIGHTS_MAP ? weightLineError(line) : gatewayMapLineError(path, line);
    return bad === null ? null : `${JSON.stringify(line.slice(0, 60))} ${bad}`;
  }
  return parseSource(line) === line ? null : `${JSON.stringify(line.slice(0, 60))} is not an address or CIDR`;
}

/** A file's bytes on disk: one entry per line. */
export function patternFileText(entries: readonly string[]): string {
  return entries.length === 0 ? "" : `${entries.join("\n")}\n`;
}

/** The section appended to a rendered config; "" when there are no files. Files sorted by path. */
export function renderPatternSection(files: readonly PatternFile[]): string {
  return files.length === 0 ? "" : `${PATTERN_SECTION}\n${renderPatternFiles(files)}`;
}

/** The files' part of the section, sorted by path. */
export function renderPatternFiles(files: readonly PatternFile[]): string {
  let out = "";
  for (const f of [...files].sort((a, b) => compareStrings(a.path, b.path))) {
    out += `#> ${f.path}\n`;
    for (const e of f.entries) out += `#| ${e}\n`;
  }
  return out;
}

/**
 * Splits a published config at its pattern section. Every path must be a pattern file's, every
 * line an address or CIDR in source-ranges.ts's canonical form, each file at most
 * MAX_SOURCE_RANGES lines, no path and no line of a file twice: anything else is an error,
 * never a file. `known`: a config split before; when its section is the same bytes, its files are
 * taken as they are (they were checked then): an endpoint moved changes no file, and checking
 * every line of the section again is most of what parsing a config costs the agent.
 */
export function splitConfig(text: string, known?: SplitConfig & { text: string }): SplitConfig | { error: string } {
  let at = 0;
  if (!text.startsWith(`${PATTERN_SECTION}\n`)) {
    const i = text.indexOf(`\n${PATTERN_SECTION}\n`);
    if (i < 0) return { head: text, files: new Map() };
    at = i + 1;
  }
  const head = text.slice(0, at);
  if (
    known !== undefined &&
    text.length - at === known.text.length - known.head.length &&
    text.slice(at) === known.text.slice(known.head.length)
  )
    return { head, files: known.files };
  const lines = text.slice(at + PATTERN_SECTION.length + 1).split("\n");
  if (lines.pop() !== "") return { error: "the pattern section does not end with a newline" };
  const files = new Map<string, string[]>();
  let current: string[] | undefined;
  let currentPath = "";
  // HAProxy would hold a repeated line twice, and the agent's read-back of a swap counts them.
  let seen = new Set<string>();
  for (const [i, line] of lines.entries()) {
    const where = `pattern section line ${i + 1}`;
    if (line.startsWith("#> ")) {
      const path = line.slice(3);
      if (!isPatternFilePath(path)) return { error: `${where}: ${JSON.stringify(path)} is not a pattern file path` };
      if (files.has(path)) return { error: `${where}: ${path} appears twice` };
      current = [];
      currentPath = path;
      seen = new Set();
      files.set(path, current);
    } else if (line.startsWith("#| ") && current) {
      const entry = line.slice(3);
      const bad = patternLineError(currentPath, entry);
      if (bad !== null) return { error: `${where}: ${bad}` };
      if (seen.has(entry)) return { error: `${where}: ${entry} appears twice in one file` };
      seen.add(entry);
      const most = patternFileKind(currentPath) === "map" ? MAX_MAP_LINES : MAX_SOURCE_RANGES;
      if (current.length === most) return { error: `${where}: more than ${most} lines in ${currentPath}` };
      current.push(entry);
    } else {
      return { error: `${where}: ${JSON.stringify(line.slice(0, 60))} is neither "#> <path>" nor "#| <line>"` };
    }
  }
  return { head, files };
}

/** A file the agent puts on disk for a config, by its path relative to the config's directory. */
export interface NodeFile {
  path: string;
  text: string;
}

export const CONFIG_FILE = "haproxy.cfg";

/**
 * What the agent writes for a config (agent/config-files.ts): haproxy.cfg, the whole text, and
 * every file of its pattern section. The dry run writes the same, so HAProxy loads its output.
 */
export function nodeFiles(text: string): NodeFile[] | { error: string } {
  const split = splitConfig(text);
  if ("error" in split) return split;
  return [
    { path: CONFIG_FILE, text },
    ...[...split.files].map(([path, entries]) => ({ path, text: patternFileText(entries) })),
  ];
}

export type PatternDiff = { kind: "files"; changed: PatternFile[] } | { kind: "reload"; reason: string };

/**
 * The files whose lines changed. A file added or removed goes with a changed `acl` line, which
 * only a reload takes; it is reported on its own all the same, so the decision never depends on
 * the order the two are found in.
 */
export function diffPatternFiles(
  from: ReadonlyMap<string, readonly string[]>,
  to: ReadonlyMap<string, readonly string[]>,
): PatternDiff {
  for (const path of to.keys()) if (!from.has(path)) return { kind: "reload", reason: `pattern file ${path} added` };
  for (const path of from.keys()) if (!to.has(path)) return { kind: "reload", reason: `pattern file ${path} removed` };
  const changed: PatternFile[] = [];
  for (const [path, entries] of to) {
    const before = from.get(path)!;
    if (before.length !== entries.length || before.some((e, i) => e !== entries[i])) changed.push({ path, entries });
  }
  return { kind: "files", changed };
}
