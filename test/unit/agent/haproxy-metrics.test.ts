import { createServer, get, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  exporterQuery,
  haproxyMetricsHandler,
  MAX_IN_FLIGHT,
  parseFamilies,
} from "../../../shared/agent/haproxy-metrics.js";
import type { HttpError } from "../../../shared/agent/http-error.js";
import { createLogger } from "../../../shared/adapters/log.js";
import type { ExporterAddress } from "../../../shared/core/haproxy-config/exporter.js";
import { REFUSING_PORT } from "../../support/net.js";

// The endpoint against a stand-in for HAProxy's exporter, for what a real HAProxy will not do on
// demand: hang, send an endless page, fail. test/integration/agent-haproxy-metrics.test.ts runs it
// against a real HAProxy.

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r).closeAllConnections());
});

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as AddressInfo).port;
}

/** An agent-side server answering with the handler, as http-api.ts does. */
async function agent(exporter: ExporterAddress | null, maxExporterBytes?: number): Promise<string> {
  const handler = haproxyMetricsHandler({
    exporter: () => exporter,
    log: createLogger("test", "silent"),
    maxExporterBytes,
  });
  const port = await listen((req, res) => {
    const url = new URL(req.url!, "http://agent");
    handler(req, res, url.searchParams).catch((err: unknown) => {
      const e = err as HttpError;
      res.writeHead(e.status, e.headers).end(e.message);
    });
  });
  return `http://127.0.0.1:${port}/metrics/haproxy?family=haproxy_backend_x`;
}

/** What the client sees: the status and body, or the error of a connection cut short. */
function fetchRaw(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
    get(url, { headers }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => {
        body += c.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode!, body }));
      res.on("error", (err) => resolve({ error: err.message }));
    }).on("error", (err) => resolve({ error: err.message }));
  });
}

describe("parseFamilies and exporterQuery", () => {
  it("asks HAProxy for the scopes of the families named, never for free slots", () => {
    const asked = parseFamilies(
      new URLSearchParams("family=haproxy_backend_a&family=haproxy_process_b&family=haproxy_backend_c"),
    );
    expect(asked).toEqual({ families: new Set(["haproxy_backend_a", "haproxy_process_b", "haproxy_backend_c"]) });
    expect(exporterQuery((asked as { families: Set<string> }).families)).toBe("no-maint=&scope=backend&scope=global");
    expect(exporterQuery(new Set(["haproxy_server_status", "haproxy_sticktable_size", "haproxy_frontend_x"]))).toBe(
      "no-maint=&scope=server&scope=sticktable&scope=frontend",
    );
  });

  it.each([
    ["", /^name the families/],
    ["family=", /a family of HAProxy's exporter/],
    ["family=haproxy_listener_x", /a family of HAProxy's exporter/],
    ["family=haproxy_backend_X", /a family of HAProxy's exporter/],
    [`family=haproxy_backend_${"x".repeat(200)}`, /at most 200/],
    ["family=haproxy_backend_x&no-maint=", /^unknown query parameter no-maint/],
  ])("refuses %#: %s", (search, error) => {
    const r = parseFamilies(new URLSearchParams(search));
    expect("error" in r && r.error).toMatch(error);
  });
});

describe("haproxyMetricsHandler", () => {
  it("passes the exporter's query, and the caller's Authorization only", async () => {
    let seen: IncomingMessage | undefined;
    const port = await listen((req, res) => {
      seen = req;
      res.end("# TYPE haproxy_backend_x gauge\nhaproxy_backend_x 1\nhaproxy_backend_y 2\n");
    });
    const url = await agent({ host: "127.0.0.1", port, path: "/prom" });
    const r = await fetchRaw(url, { authorization: "Basic YTpi", cookie: "c=1", "x-forwarded-for": "1.2.3.4" });
    expect(r).toEqual({ status: 200, body: "# TYPE haproxy_backend_x gauge\nhaproxy_backend_x 1\n" });
    expect(seen!.url).toBe("/prom?no-maint=&scope=backend");
    expect(seen!.headers.authorization).toBe("Basic YTpi");
    expect(seen!.headers.cookie).toBeUndefined();
    expect(seen!.headers["x-forwarded-for"]).toBeUndefined();
  });

  it(`refuses a scrape beyond ${MAX_IN_FLIGHT} in flight, and takes the next once one ends`, async () => {
    const waiting: ServerResponse[] = [];
    const port = await listen((_req, res) => {
      waiting.push(res);
    });
    const url = await agent({ host: "127.0.0.1", port, path: "/metrics" });
    const first = Array.from({ length: MAX_IN_FLIGHT }, () => fetchRaw(url));
    await expect.poll(() => waiting.length).toBe(MAX_IN_FLIGHT);
    expect(await fetchRaw(url)).toEqual({
      status: 503,
      body: `${MAX_IN_FLIGHT} scrapes of HAProxy's exporter are in flight: try again`,
    });
    waiting.shift()!.end("haproxy_backend_x 1\n");
    expect(await first[0]).toEqual({ status: 200, body: "haproxy_backend_x 1\n" });
    const next = fetchRaw(url);
    await expect.poll(() => waiting.length).toBe(MAX_IN_FLIGHT);
    for (const res of waiting) res.end("haproxy_backend_x 2\n");
    for (const r of [...first.slice(1), next]) expect(await r).toEqual({ status: 200, body: "haproxy_backend_x 2\n" });
  });

  it("gives up on an exporter that does not answer within the scrape's timeout", async () => {
    const port = await listen(() => undefined);
    const url = await agent({ host: "127.0.0.1", port, path: "/metrics" });
    const started = Date.now();
    const r = await fetchRaw(url, { "x-prometheus-scrape-timeout-seconds": "1" });
    expect(r).toMatchObject({ status: 502, body: expect.stringMatching(/does not answer: .*abort/i) });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("cuts the connection when the page stops midway past the deadline: never a page that parses as whole", async () => {
    const port = await listen((_req, res) => {
      res.write("# TYPE haproxy_backend_x gauge\nhaproxy_backend_x 1\n");
    });
    const url = await agent({ host: "127.0.0.1", port, path: "/metrics" });
    expect(await fetchRaw(url, { "x-prometheus-scrape-timeout-seconds": "1" })).toEqual({ error: "aborted" });
  });

  it("cuts the connection at once when the exporter's page breaks off", async () => {
    const port = await listen((_req, res) => {
      res.write("# TYPE haproxy_backend_x gauge\nhaproxy_backend_x 1\n");
      setTimeout(() => res.socket?.destroy(), 50);
    });
    const url = await agent({ host: "127.0.0.1", port, path: "/metrics" });
    const started = Date.now();
    expect(await fetchRaw(url)).toEqual({ error: "aborted" });
    // Well within the default deadline of 10 s.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("stops reading a page over the size limit, and cuts the connection", async () => {
    let written = 0;
    const port = await listen((_req, res) => {
      const line = Buffer.from("haproxy_backend_x 1\n".repeat(1000));
      const more = () => {
        while (written < 64 * 1024 ** 2) {
          written += line.length;
          if (!res.write(line)) return void res.once("drain", more);
        }
        res.end();
      };
      res.on("close", () => {
        written = Number.POSITIVE_INFINITY;
      });
      more();
    });
    const url = await agent({ host: "127.0.0.1", port, path: "/metrics" }, 1024 ** 2);
    expect(await fetchRaw(url)).toEqual({ error: "aborted" });
  });

  it("answers 502 for an exporter that fails or is not there, 401 for one that asks for its user", async () => {
    const failing = await listen((_req, res) => res.writeHead(500).end("no"));
    expect(await fetchRaw(await agent({ host: "127.0.0.1", port: failing, path: "/metrics" }))).toEqual({
      status: 502,
      body: `HAProxy's exporter at http://127.0.0.1:${failing}/metrics answered 500`,
    });
    expect(await fetchRaw(await agent({ host: "127.0.0.1", port: REFUSING_PORT, path: "/metrics" }))).toMatchObject({
      status: 502,
      body: expect.stringContaining("ECONNREFUSED"),
    });
    const protectedPage = await listen((_req, res) =>
      res.writeHead(401, { "www-authenticate": 'Basic realm="servicelb"' }).end(),
    );
    expect(await fetchRaw(await agent({ host: "127.0.0.1", port: protectedPage, path: "/metrics" }))).toMatchObject({
      status: 401,
    });
    expect(await fetchRaw(await agent(null))).toMatchObject({ status: 503 });
  });
});
