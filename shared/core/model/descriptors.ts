/*
 * The file descriptors HAProxy 2.6 reserves when it starts or reloads (haproxy.c: init(),
 * compute_ideal_maxconn(), compute_ideal_maxsock()). When they exceed its hard RLIMIT_NOFILE it
 * refuses to start, and a reload fails ("Cannot raise FD limit to N, limit is M"), although
 * `haproxy -c` accepts the same config: the check does not look at limits. So the agent counts
 * them before it lets a config near HAProxy, and the function counts the part a config decides.
 *
 * Matched against HAProxy's own figure under `prlimit` on this machine
 * (test/integration/agent-open-files.test.ts):
 *
 *   10                       HAProxy's own reserve
 * + 3 per thread             a poller and a wake-up pipe each
 * + 1 + 11                   master-worker mode; the master CLI (-S): its listener and 10 connections
 * + 2 × maxconn              a client and a server side per connection; without `maxconn` HAProxy
 *                            takes whatever is left, but at least 100 connections
 * + 1 per listening address  `bind` (a port range counts each port)
 * + 1 per `stats socket`     and the connections of the stats frontend (`stats maxconn`, 10)
 * + 1 per checked server     every health-checked server, free slots included (a server without
 *                            `check` costs none: 160,000 of them start under a limit of 20,000)
 */

import { globalSetting } from "../haproxy-config/globals.js";
import type { Model } from "./model.js";

const HAPROXY_RESERVE = 10;
const PER_THREAD = 3;
const MASTER_WORKER = 1;
const MASTER_CLI = 1 + 10;
/** DEFAULT_MAXCONN of HAProxy's build: the least it runs with when the limit leaves fewer. */
const LEAST_MAXCONN = 100;
const STATS_MAXCONN = 10;
/** HAProxy's MAX_THREADS: `nbthread` defaults to the CPUs it may run on, at most this. */
const MOST_THREADS = 64;

/** A node as the agent sees it: the most descriptors its HAProxy may open, and the CPUs it may run threads on. */
export interface NodeFiles {
  limit: number;
  cpus: number;
}

/** What a config asks of a node's descriptors, from its text. */
export interface ConfigDescriptors {
  /** Listening addresses, stats sockets with their connections, and servers. */
  own: number;
  /** `maxconn` of the global section, or null (HAProxy then sizes it by the limit). */
  maxconn: number | null;
  /** `nbthread` of the global section, or null (one per CPU). */
  nbthread: number | null;
}

/** Lines whose keyword opens a section or costs descriptors. */
const COUNTED =
  /^[ \t]*(defaults|backend|listen|frontend|global|peers|resolvers|userlist|mailers|ring|program|cache|http-errors|server|server-template|default-server|bind|stats[ \t]+socket|stats[ \t]+maxconn)(?=[ \t]|$)(.*)$/gm;

/** Whether a `server` or `default-server` line's parameters turn checks on (true), off (false), or say nothing. */
function checkOf(params: readonly string[]): boolean | undefined {
  for (let i = params.length - 1; i >= 0; i--)
    if (params[i] === "check" || params[i] === "no-check") return params[i] === "check";
  return undefined;
}

/**
 * Counts from a config's text: every `bind` address and stats socket, and every server that is
 * health-checked, by its own `check`, its section's `default-server`, or that of the defaults
 * section it inherits (named with `from`, else the last one above it). An overcount is safe (a
 * config is refused that HAProxy might have run), an undercount is not (a reload fails).
 */
export function configDescriptors(text: string): ConfigDescriptors {
  let servers = 0;
  let binds = 0;
  let sockets = 0;
  let statsMaxconn = STATS_MAXCONN;
  const defaultsChecked = new Map<string, boolean>();
  let lastDefaults = false;
  let inDefaults: string | null = null;
  let checked = false;
  for (const m of text.matchAll(COUNTED)) {
    const keyword = m[1]!;
    const words = m[2]!
      .trim()
      .split(/[ \t]+/)
      .filter(Boolean);
    if (keyword === "defaults") {
      inDefaults = words[0] ?? "";
      checked = false;
      defaultsChecked.set(inDefaults, false);
      lastDefaults = false;
    } else if (keyword === "backend" || keyword === "listen" || keyword === "frontend") {
      inDefaults = null;
      const from = words.indexOf("from");
      checked = from >= 0 ? (defaultsChecked.get(words[from + 1] ?? "") ?? false) : lastDefaults;
    } else if (/^[a-z]/.test(keyword) && !["server", "server-template", "default-server", "bind"].includes(keyword)) {
      if (!keyword.startsWith("stats")) inDefaults = null;
      if (keyword.endsWith("socket")) sockets++;
      else if (keyword.endsWith("maxconn")) statsMaxconn = Number.parseInt(words[0] ?? "", 10) || STATS_MAXCONN;
    } else if (keyword === "default-server") {
      checked = checkOf(words) ?? checked;
      if (inDefaults !== null) {
        defaultsChecked.set(inDefaults, checked);
        lastDefaults = checked;
      }
    } else if (keyword === "server") {
      if (checkOf(words.slice(2)) ?? checked) servers++;
    } else if (keyword === "server-template") {
      if (checkOf(words.slice(3)) ?? checked) servers += templateCount(words[1]);
    } else if (keyword === "bind") binds += bindCount(words[0] ?? "");
  }
  return {
    own: servers + binds + sockets + (sockets > 0 ? statsMaxconn : 0),
    maxconn: globalNumber(text, "maxconn"),
    nbthread: globalNumber(text, "nbthread"),
  };
}

/** `server-template <prefix> <num | low-high> …`: how many servers it makes (unreadable: one). */
function templateCount(range: string | undefined): number {
  const m = /^(\d+)(?:-(\d+))?$/.exec(range ?? "");
  if (!m) return 1;
  return m[2] === undefined ? Number(m[1]) : Math.max(1, Number(m[2]) - Number(m[1]) + 1);
}

/** `bind a:80,b:81-85`: one listener per address and per port of a range. */
function bindCount(addresses: string): number {
  let n = 0;
  for (const address of addresses.split(",")) {
    const range = /:(\d+)-(\d+)$/.exec(address);
    n += range ? Math.max(1, Number(range[2]) - Number(range[1]) + 1) : 1;
  }
  return n;
}

/** A numeric setting of the global section, or null. */
function globalNumber(text: string, keyword: string): number | null {
  const value = globalSetting(text, keyword);
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : null;
}

/**
 * What HAProxy takes on a node before a config's listeners and servers, for a config without
 * `maxconn` or `nbthread` unless given: its reserve, its threads, the master, and the least
 * connections it runs with.
 */
export function haproxyReserve(threads: number, maxconn: number | null = null): number {
  return HAPROXY_RESERVE + PER_THREAD * threads + MASTER_WORKER + MASTER_CLI + 2 * (maxconn ?? LEAST_MAXCONN);
}

/** The threads HAProxy runs on a node with `cpus` CPUs, unless the config says. */
export function haproxyThreads(cpus: number, nbthread: number | null = null): number {
  return nbthread ?? Math.min(Math.max(1, cpus), MOST_THREADS);
}

/** What a config needs on a node with `cpus` CPUs, in all. */
export function descriptorsNeeded(config: ConfigDescriptors, cpus: number): number {
  return config.own + haproxyReserve(haproxyThreads(cpus, config.nbthread), config.maxconn);
}

/**
 * The `own` count of the config the built-in templates render from this model, without rendering
 * it: the HTTP frontend and the stats page listen on one address each, the HTTPS frontend and every
 * TCP frontend and every Gateway port other than --http-port on one more, the runtime API is one
 * stats socket, and every slot of a checked backend is a checked server (Gateway backends are not
 * checked). Kept equal to configDescriptors of the rendered text by a test.
 */
export function modelDescriptors(model: Model): number {
  let servers = 0;
  for (const b of model.backends) if (b.settings.check) servers += b.servers.length;
  const binds = 2 + (model.options.sslCert ? 1 : 0) + model.tcpFrontends.length + gatewayBinds(model);
  return servers + binds + 1 + STATS_MAXCONN;
}

/** The Gateway listener ports with a frontend of their own (core/gateway/render.ts). */
export function gatewayBinds(model: Pick<Model, "gateway">): number {
  return model.gateway?.frontends.filter((f) => !f.shared).length ?? 0;
}
