/*
 * The agent's HTTP API:
 *   POST /notify  — a ping from the reconcile function (bearer token); 202 at once, the pull runs after.
 *   GET  /healthz — 200 only when HAProxy answers and runs an applied config (with a warning when pulls are stale); else 503 with the reason.
 *   GET  /metrics — Prometheus.
 *   GET  /metrics/haproxy?family=… — HAProxy's exporter, only the families named (haproxy-metrics.ts).
 *   GET  /status  — what runs, since when, the last error.
 */

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { parseConfigKey, REVISION_DIGITS } from "../core/publish/config-key.js";
import { digestSchema } from "../core/publish/config-digest.js";
import type { Logger } from "../adapters/log.js";
import { BodyTooLargeError, readBody } from "../adapters/request-body.js";
import type { AgentMetrics } from "./metrics.js";
import { type HaproxyMetricsOptions, haproxyMetricsHandler } from "./haproxy-metrics.js";
import { HttpError } from "./http-error.js";
import { bearerToken, tokenMatches } from "./token.js";
import { errorMessage } from "../core/error-message.js";

/** What the reconcile function's notifier sends (shared/adapters/notifier.ts). */
export const notifySchema = z.object({
  key: z.string().refine((key) => !/\s/.test(key) && parseConfigKey(key) !== null, "a config key"),
  /** The config's digest: sha256 hex, or tree1:<hex> (core/publish/config-digest.ts). */
  sha256: digestSchema,
  revision: z.string().regex(new RegExp(`^[0-9]{1,${REVISION_DIGITS}}$`), "a decimal revision"),
});
export type NotifyBody = z.infer<typeof notifySchema>;

/** `warning`: the node serves, but something an operator should know about is wrong. */
export type Health = { ok: true; warning?: string } | { ok: false; reason: string };

export interface HttpApiOptions {
  host: string;
  port: number;
  expectedToken: () => Promise<string>;
  /** Must not wait for the pull. */
  onNotify: (body: NotifyBody) => string;
  health: () => Promise<Health>;
  status: () => unknown;
  metrics: AgentMetrics;
  /** Where HAProxy's exporter answers, for GET /metrics/haproxy. */
  exporter: HaproxyMetricsOptions["exporter"];
  log: Logger;
}

export interface HttpApi {
  /** e.g. http://127.0.0.1:8081 */
  url: string;
  close(): Promise<void>;
}

const MAX_BODY = 16 * 1024;

function answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === "string" ? body : `${JSON.stringify(body, null, 2)}\n`;
  const type = typeof body === "string" ? "text/plain; charset=utf-8" : "application/json";
  res.writeHead(status, { "content-type": type, "cache-control": "no-store", ...headers });
  res.end(text);
}

export async function startHttpApi(options: HttpApiOptions): Promise<HttpApi> {
  const haproxyMetrics = haproxyMetricsHandler({ exporter: options.exporter, log: options.log });
  async function notify(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let expected: string;
    try {
      expected = await options.expectedToken();
    } catch (err) {
      options.log.error({ err: errorMessage(err) }, "cannot read the notify token");
      throw new HttpError(503, "the notify token cannot be read");
    }
    // Authenticate before reading the body: strangers get nothing parsed.
    if (!tokenMatches(bearerToken(req.headers.authorization), expected)) {
      options.metrics.notifications.inc({ result: "unauthorized" });
      throw new HttpError(401, "a valid bearer token is required", {
        "www-authenticate": 'Bearer realm="servicelb-agent"',
      });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readBody(req, MAX_BODY));
    } catch (err) {
      // The 413 reaches the client (a destroyed socket would only say "reset"); `connection:
      // close` ends the connection, whose unread rest of the body nobody wants, once it is sent.
      if (err instanceof BodyTooLargeError) throw new HttpError(413, err.message, { connection: "close" });
      options.metrics.notifications.inc({ result: "malformed" });
      throw new HttpError(400, "the body is not JSON");
    }
    const body = notifySchema.safeParse(parsed);
    if (!body.success) {
      options.metrics.notifications.inc({ result: "malformed" });
      throw new HttpError(400, body.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "));
    }
    const action = options.onNotify(body.data);
    options.metrics.notifications.inc({ result: "accepted" });
    answer(res, 202, { accepted: true, action });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://agent");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const only = (allowed: string) => {
      if (!allowed.split(",").includes(method))
        throw new HttpError(405, `use ${allowed.replace(",", " or ")}`, { allow: allowed });
    };
    switch (path) {
      case "/notify":
        only("POST");
        return notify(req, res);
      case "/healthz": {
        only("GET,HEAD");
        const h = await options.health();
        return h.ok ? answer(res, 200, h) : answer(res, 503, h);
      }
      case "/metrics":
        only("GET,HEAD");
        return sendMetrics(req, res, options.metrics);
      case "/metrics/haproxy":
        only("GET");
        return haproxyMetrics(req, res, url.searchParams);
      case "/status":
        only("GET,HEAD");
        return answer(res, 200, options.status());
      default:
        throw new HttpError(404, "not found: /notify, /healthz, /metrics, /metrics/haproxy, /status");
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof HttpError) return answer(res, err.status, { error: err.message }, err.headers);
      options.log.error({ err }, "agent HTTP handler failed");
      answer(res, 500, { error: "internal error" });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(":") ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const gzipAsync = promisify(gzip);

/**
 * The page, gzipped for a scraper that asks (Prometheus does): its info series hold a line per
 * endpoint, 10 MiB at 10,000 Services of 10 endpoints, a tenth of that compressed. Off the event
 * loop (zlib's pool), at the fastest level: the page is repetitive, and scraped every few seconds.
 */
async function sendMetrics(req: IncomingMessage, res: ServerResponse, metrics: AgentMetrics): Promise<void> {
  const page = await metrics.registry.metrics();
  const headers = { "content-type": metrics.registry.contentType, vary: "accept-encoding" };
  if (!/\bgzip\b/.test(req.headers["accept-encoding"] ?? "")) {
    res.writeHead(200, headers);
    res.end(page);
    return;
  }
  const body = await gzipAsync(page, { level: 1 });
  res.writeHead(200, { ...headers, "content-encoding": "gzip" });
  res.end(body);
}
