/*
 * GET /metrics/haproxy?family=haproxy_backend_http_requests_total&family=…: HAProxy's own
 * exporter, cut down to the families asked for (docs/operations.md#observability). HAProxy 2.6's
 * exporter filters by scope only, and its backend scope is 80 samples a backend, spares included:
 * 5.6 MiB at 1,000 Services, of which a dashboard reads a tenth.
 *
 * Never a proxy: the page comes from the exporter of the config HAProxy runs (its address read
 * from that config), with only `scope` (each family's own, from its prefix) and `no-maint` (no
 * series for free slots, which are in maintenance) in the query; the caller names families, never
 * a URL. The caller's Authorization header goes to that exporter as is, so a stats page protected
 * by --stats-user stays protected here. HAProxy's answer is read within a deadline and a size
 * limit, streamed through the family filter and gzipped for a scraper that asks, as /metrics is.
 */

import { get, type IncomingMessage, type ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { Transform } from "node:stream";
import { z } from "zod";
import { errorMessage } from "../core/error-message.js";
import { describeValue } from "../core/describe-value.js";
import { type ExporterAddress, exporterOf } from "../core/haproxy-config/exporter.js";
import type { HaproxyEnv } from "../core/haproxy-config/environment.js";
import type { Logger } from "../adapters/log.js";
import { familyFilterStream } from "./exposition-filter.js";
import { HttpError } from "./http-error.js";

/** The exporter's scope that writes each family prefix (HAProxy 2.6, addons/promex). */
const SCOPES = {
  process: "global",
  frontend: "frontend",
  backend: "backend",
  server: "server",
  sticktable: "sticktable",
} as const;

export const MAX_FAMILIES = 64;
/**
 * The most read from HAProxy for one scrape: above its whole page at 10,000 Services, per-slot
 * series included (484 MiB, BENCHMARKS.md). Past it the scrape fails rather than the agent
 * streaming without end.
 */
export const MAX_EXPORTER_BYTES = 512 * 1024 ** 2;
/** Without Prometheus's own scrape timeout in the request: its default. */
const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_TIMEOUT_MS = 60_000;

const family = z
  .string()
  .max(200, "at most 200 characters")
  .regex(
    new RegExp(`^haproxy_(${Object.keys(SCOPES).join("|")})_[a-z0-9_]+$`),
    `a family of HAProxy's exporter: haproxy_{${Object.keys(SCOPES).join(",")}}_…`,
  );

/** The families asked for, or why the query is refused. */
export function parseFamilies(search: URLSearchParams): { families: Set<string> } | { error: string } {
  const unknown = [...new Set(search.keys())].filter((k) => k !== "family");
  if (unknown.length > 0) return { error: `unknown query parameter ${unknown.join(", ")}: only family is taken` };
  const names = search.getAll("family");
  if (names.length === 0)
    return { error: "name the families to keep: ?family=haproxy_backend_http_requests_total&family=…" };
  if (names.length > MAX_FAMILIES) return { error: `at most ${MAX_FAMILIES} families` };
  for (const name of names) {
    const r = family.safeParse(name);
    if (!r.success) return { error: `family ${describeValue(name, 80)}: ${r.error.issues[0]!.message}` };
  }
  return { families: new Set(names) };
}

/** The exporter's query for these families: their scopes, and no series for slots in maintenance. */
export function exporterQuery(families: ReadonlySet<string>): string {
  const scopes = new Set([...families].map((f) => SCOPES[f.split("_")[1] as keyof typeof SCOPES]));
  return `no-maint=&${[...scopes].map((s) => `scope=${s}`).join("&")}`;
}

/**
 * The exporter of the config HAProxy runs, read once per config text (scrapes outnumber configs),
 * with HAProxy's environment (default: the agent's own).
 */
export function runningExporter(
  running: () => { text: string } | null,
  env: HaproxyEnv = process.env,
): () => ExporterAddress | null {
  let seen: { text: string; at: ExporterAddress | null } = { text: "", at: null };
  return () => {
    const r = running();
    if (r === null) return null;
    if (seen.text !== r.text) seen = { text: r.text, at: exporterOf(r.text, env) ?? null };
    return seen.at;
  };
}

/** Prometheus sends its scrape timeout: HAProxy is given that long, within bounds. */
function deadlineMs(req: IncomingMessage): number {
  const seconds = Number(req.headers["x-prometheus-scrape-timeout-seconds"]);
  if (!Number.isFinite(seconds) || seconds <= 0) return DEFAULT_TIMEOUT_MS;
  return Math.min(Math.max(seconds * 1000, 1000), MAX_TIMEOUT_MS);
}

export interface HaproxyMetricsOptions {
  /** Where the running config's exporter answers (null: no config runs, or none found in it). */
  exporter: () => ExporterAddress | null;
  log: Logger;
  /** Tests lower it. */
  maxExporterBytes?: number;
}

/** Answers one GET /metrics/haproxy; throws HttpError before anything is sent. */
export type HaproxyMetricsHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  search: URLSearchParams,
) => Promise<void>;

/**
 * A Prometheus pair scrapes each node twice an interval, and an operator may look too: more at
 * once is someone making HAProxy write its page over and over (a second of its CPU at 10,000
 * Services, and more with per-slot families), refused until one ends.
 */
export const MAX_IN_FLIGHT = 4;

/** The handler of one agent, with its own count of scrapes in flight. */
export function haproxyMetricsHandler(options: HaproxyMetricsOptions): HaproxyMetricsHandler {
  let inFlight = 0;
  return async (req, res, search) => {
    const asked = parseFamilies(search);
    if ("error" in asked) throw new HttpError(400, asked.error);
    if (inFlight >= MAX_IN_FLIGHT)
      throw new HttpError(503, `${MAX_IN_FLIGHT} scrapes of HAProxy's exporter are in flight: try again`, {
        "retry-after": "1",
      });
    inFlight++;
    try {
      await send(req, res, asked.families, options);
    } finally {
      inFlight--;
    }
  };
}

async function send(
  req: IncomingMessage,
  res: ServerResponse,
  families: ReadonlySet<string>,
  options: HaproxyMetricsOptions,
): Promise<void> {
  const at = options.exporter();
  if (at === null)
    throw new HttpError(
      503,
      "no exporter to read: no config runs yet, or the running config serves no `http-request use-service prometheus-exporter` with a bind address",
    );
  const signal = AbortSignal.timeout(deadlineMs(req));
  const where = `http://${at.host}:${at.port}${at.path}`;
  const upstream = await new Promise<IncomingMessage>((resolve, reject) => {
    const headers: Record<string, string> = req.headers.authorization
      ? { authorization: req.headers.authorization }
      : {};
    get(`${where}?${exporterQuery(families)}`, { headers, signal }, resolve).on("error", (err) =>
      reject(new HttpError(502, `HAProxy's exporter at ${where} does not answer: ${err.message}`)),
    );
  });
  if (upstream.statusCode !== 200) {
    upstream.resume();
    if (upstream.statusCode === 401)
      throw new HttpError(401, "HAProxy's stats page requires its user (--stats-user)", {
        "www-authenticate": upstream.headers["www-authenticate"] ?? 'Basic realm="servicelb"',
      });
    throw new HttpError(502, `HAProxy's exporter at ${where} answered ${upstream.statusCode}`);
  }

  const filter = familyFilterStream(families);
  const gzip = /\bgzip\b/.test(req.headers["accept-encoding"] ?? "");
  res.writeHead(200, {
    "content-type": "text/plain; version=0.0.4; charset=utf-8",
    "cache-control": "no-store",
    vary: "accept-encoding",
    ...(gzip ? { "content-encoding": "gzip" } : {}),
  });
  const limit = options.maxExporterBytes ?? MAX_EXPORTER_BYTES;
  try {
    if (gzip) await pipeline(upstream, sizeLimit(limit), filter, createGzip({ level: 1 }), res, { signal });
    else await pipeline(upstream, sizeLimit(limit), filter, res, { signal });
  } catch (err) {
    // Headers are out: a page cut short must not parse as whole, so the connection is reset.
    options.log.warn({ err: errorMessage(err), exporter: where }, "HAProxy's exporter page not sent whole");
    res.destroy();
    return;
  }
  const { malformed, tooLong } = filter.counts;
  if (malformed + tooLong > 0)
    options.log.warn({ malformed, tooLong, exporter: where }, "lines of HAProxy's exporter page dropped unread");
}

function sizeLimit(maxBytes: number): Transform {
  let bytes = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) done(new Error(`HAProxy's exporter page is over ${maxBytes} bytes`));
      else done(null, chunk);
    },
  });
}
