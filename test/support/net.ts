import { createServer as createHttpServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, createServer as createTcpServer, type AddressInfo } from "node:net";

export { freePort } from "../../shared/dev/ports.js";

export interface EchoBackend {
  port: number;
  name: string;
  /** Requests it served: path as received and headers. */
  seen: Array<{ path: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

/** A tiny HTTP server that answers `<name> <path as received>` so tests can tell who answered and what it saw. */
export async function echoBackend(name: string, port = 0): Promise<EchoBackend> {
  const seen: EchoBackend["seen"] = [];
  const server: Server = createHttpServer((req, res) => {
    seen.push({ path: req.url ?? "", headers: req.headers });
    res.setHeader("content-type", "text/plain");
    res.end(`${name} ${req.url}`);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    name,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A TCP server that greets with its name, for TCP frontends. */
export async function tcpGreeter(name: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = createTcpServer((sock) => sock.end(`${name}\n`));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface HttpAnswer {
  status: number;
  body: string;
  headers: IncomingHttpHeaders;
}

/** One HTTP/1.1 request without connection reuse, so every request sees the current config. */
export function httpGet(port: number, path: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  return httpRequest(port, "GET", path, headers);
}

/** httpGet with any method. */
export function httpRequest(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, method, path, headers: { connection: "close", ...headers }, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error(`${method} ${path} on :${port} timed out`)));
    req.end();
  });
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface CountingProxy {
  port: number;
  /** TCP connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/** A TCP proxy to 127.0.0.1:target that counts the connections made through it. */
export async function countingProxy(target: number): Promise<CountingProxy> {
  let connections = 0;
  const server = createTcpServer((client) => {
    connections += 1;
    const upstream = connect(target, "127.0.0.1");
    client.pipe(upstream).pipe(client);
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return connections;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A loopback port where a connection is refused at once: port 1, privileged, so no test binds it,
 * and nothing listens there on a machine of this kind. A port closed a moment ago is no such
 * port: the kernel hands it to the next listen(0), and a CI run met another test's server there.
 */
export const REFUSING_PORT = 1;
