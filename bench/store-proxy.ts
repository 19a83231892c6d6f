/*
 * An HTTP proxy in front of the object store that counts what each client asks of it, and makes
 * it behave like a remote store under load: a latency drawn per request, and a share of requests
 * answered 503 SlowDown, as S3 answers a burst on one prefix. Each client gets an endpoint of its
 * own (a listener on a port of its own), so the counts need nothing from the client but its store
 * URL: the agent and the publisher are measured through their public store settings, whatever
 * protocol they speak over it.
 *
 * Counted per client: requests by kind (S3 operation as the method and query say), and body bytes
 * each way (headers are not counted: S3 bills requests and transfer, and a header is small beside
 * a config). A 503 the proxy makes is counted as a request (the client sent it) with no bytes down.
 */

import { Agent, createServer, type IncomingMessage, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type RequestKind = "list" | "get" | "head" | "put" | "delete" | "other";

export interface Traffic {
  requests: Record<RequestKind, number>;
  /** Requests answered 503 SlowDown by the proxy (the store never saw them). */
  slowDowns: number;
  /** Request body bytes (uploads). */
  bytesUp: number;
  /** Response body bytes (downloads). */
  bytesDown: number;
  /** Requests to status/<node>.json (the agents' reports), within `requests`. */
  statusWrites: number;
}

export interface StoreProxyOptions {
  /** The store's endpoint, e.g. s3rver's. */
  target: string;
  /** Added before each request is forwarded (or refused): uniform in [min, max] ms. */
  latencyMs?: { min: number; max: number };
  /** Share of requests answered 503 SlowDown, 0..1. */
  slowDownRate?: number;
  /** A seeded source makes a run's faults repeatable. */
  random?: () => number;
}

export interface StoreProxy {
  /** The endpoint for `client` (opened on first use): its requests are counted under its name. */
  endpointFor(client: string): Promise<string>;
  /** A copy of the counts so far, per client. */
  traffic(): Map<string, Traffic>;
  stop(): Promise<void>;
}

const SLOW_DOWN_BODY =
  '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>';

function emptyTraffic(): Traffic {
  return {
    requests: { list: 0, get: 0, head: 0, put: 0, delete: 0, other: 0 },
    slowDowns: 0,
    bytesUp: 0,
    bytesDown: 0,
    statusWrites: 0,
  };
}

function kindOf(req: IncomingMessage): RequestKind {
  const url = new URL(req.url ?? "/", "http://store");
  if (req.method === "GET") return url.searchParams.has("list-type") ? "list" : "get";
  if (req.method === "HEAD") return "head";
  if (req.method === "PUT") return "put";
  if (req.method === "DELETE" || (req.method === "POST" && url.searchParams.has("delete"))) return "delete";
  return "other";
}

export function sumTraffic(all: Iterable<Traffic>): Traffic {
  const sum = emptyTraffic();
  for (const t of all) {
    for (const k of Object.keys(sum.requests) as RequestKind[]) sum.requests[k] += t.requests[k];
    sum.slowDowns += t.slowDowns;
    sum.bytesUp += t.bytesUp;
    sum.bytesDown += t.bytesDown;
    sum.statusWrites += t.statusWrites;
  }
  return sum;
}

/** Requests of every kind. */
export function requestCount(t: Traffic): number {
  return Object.values(t.requests).reduce((a, b) => a + b, 0);
}

/** What happened between two copies of the counts, per client of `after`. */
export function trafficBetween(before: Map<string, Traffic>, after: Map<string, Traffic>): Map<string, Traffic> {
  const out = new Map<string, Traffic>();
  for (const [client, a] of after) {
    const b = before.get(client) ?? emptyTraffic();
    const d = emptyTraffic();
    for (const k of Object.keys(d.requests) as RequestKind[]) d.requests[k] = a.requests[k] - b.requests[k];
    d.slowDowns = a.slowDowns - b.slowDowns;
    d.bytesUp = a.bytesUp - b.bytesUp;
    d.bytesDown = a.bytesDown - b.bytesDown;
    d.statusWrites = a.statusWrites - b.statusWrites;
    out.set(client, d);
  }
  return out;
}

export async function startStoreProxy(options: StoreProxyOptions): Promise<StoreProxy> {
  const target = new URL(options.target);
  const random = options.random ?? Math.random;
  const latency = options.latencyMs ?? { min: 0, max: 0 };
  const slowDownRate = options.slowDownRate ?? 0;
  // Many clients, one store: connections to it are reused rather than opened per request.
  const upstream = new Agent({ keepAlive: true, maxSockets: 512 });
  const counts = new Map<string, Traffic>();
  const servers = new Map<string, Promise<{ server: Server; endpoint: string }>>();

  function handle(client: string, req: IncomingMessage, res: ServerResponse): void {
    const t = counts.get(client)!;
    t.requests[kindOf(req)]++;
    if (/\/status\/[^/?]+\.json(\?|$)/.test(req.url ?? "")) t.statusWrites++;
    const delay = latency.min + random() * (latency.max - latency.min);
    const refuse = random() < slowDownRate;
    const body: Buffer[] = [];
    req.on("data", (chunk: Buffer) => {
      t.bytesUp += chunk.length;
      body.push(chunk);
    });
    req.on("end", () => {
      setTimeout(() => {
        if (refuse) {
          t.slowDowns++;
          res.writeHead(503, {
            "content-type": "application/xml",
            "content-length": Buffer.byteLength(SLOW_DOWN_BODY),
          });
          res.end(SLOW_DOWN_BODY);
          return;
        }
        const up = request(
          {
            host: target.hostname,
            port: target.port,
            method: req.method,
            path: req.url,
            // The Host header is signed (SigV4): it goes on as the client sent it.
            headers: req.headers,
            agent: upstream,
          },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.on("data", (chunk: Buffer) => {
              t.bytesDown += chunk.length;
              res.write(chunk);
            });
            answer.on("end", () => res.end());
          },
        );
        up.on("error", (err) => {
          if (!res.headersSent) res.writeHead(502);
          res.end(String(err));
        });
        up.end(Buffer.concat(body));
      }, delay);
    });
  }

  function open(client: string): Promise<{ server: Server; endpoint: string }> {
    counts.set(client, emptyTraffic());
    const server = createServer((req, res) => handle(client, req, res));
    server.keepAliveTimeout = 60_000;
    return new Promise((resolve) =>
      server.listen(0, "127.0.0.1", () =>
        resolve({ server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
      ),
    );
  }

  return {
    async endpointFor(client) {
      let s = servers.get(client);
      if (!s) {
        s = open(client);
        servers.set(client, s);
      }
      return (await s).endpoint;
    },
    traffic() {
      return new Map([...counts].map(([client, t]) => [client, { ...t, requests: { ...t.requests } }]));
    },
    async stop() {
      for (const s of servers.values()) {
        const { server } = await s;
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
      upstream.destroy();
    },
  };
}
