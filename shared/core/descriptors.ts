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
 * + 1 per server             every health-checked server, free slots included: counted here for
 *                            every server, checked or not
 */

import { globalSetting } from "./config-facts.js";
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

/** Lines whose keyword costs descriptors, in whichever section. */
const COUNTED =
  /^[ \t]*(server|server-template|bind|stats[ \t]+socket|stats[ \t]+maxconn)[ \t]+(\S+)(?:[ \t]+(\S+))?/gm;

/**
 * Counts from a config's text. An overcount is safe (a config is refused that HAProxy might have
 * run), an undercount is not (a reload fails), so every `server` line counts, checked or not.
 */
export function configDescriptors(text: string): ConfigDescriptors {
  let servers = 0;
  let binds = 0;
  let sockets = 0;
  let statsMaxconn = STATS_MAXCONN;
  for (const m of text.matchAll(COUNTED)) {
    const keyword = m[1]!;
    if (keyword === "server") servers++;
    else if (keyword === "server-template") servers += templateCount(m[3]);
    else if (keyword === "bind") binds += bindCount(m[2]!);
    else if (keyword.endsWith("socket")) sockets++;
    else statsMaxconn = Number.parseInt(m[2]!, 10) || STATS_MAXCONN;
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
 * TCP frontend on one more, the runtime API is one stats socket, and every slot is a server line.
 * Kept equal to configDescriptors of the rendered text by a test.
 */
export function modelDescriptors(model: Model): number {
  let servers = 0;
  for (const b of model.backends) servers += b.servers.length;
  const binds = 2 + (model.options.sslCert ? 1 : 0) + model.tcpFrontends.length;
  return servers + binds + 1 + STATS_MAXCONN;
}
