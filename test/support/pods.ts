/*
 * Pods with one behaviour each, for traffic tests of per-Service settings: slow answers, a health
 * endpoint that can fail, WebSocket-style upgrades, PROXY protocol, HTTP/2 and TLS.
 */

import { createServer as createHttpServer, request, type IncomingHttpHeaders } from "node:http";
import {
  connect as h2connect,
  createSecureServer,
  createServer as createH2Server,
  type ServerHttp2Stream,
} from "node:http2";
import type { TLSSocket } from "node:tls";
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from "node:net";
import { readFileSync } from "node:fs";

export interface Pod {
  port: number;
  close(): Promise<void>;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

function closer(server: Server, sockets: Set<Socket>): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
}

function track(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  return sockets;
}

export interface AppPod extends Pod {
  name: string;
  /** What `/healthz` answers; any other path answers `<name> <path>` after `?ms=` milliseconds. */
  health: number;
  /** Requests in flight now, and the most at once. */
  inFlight: number;
  maxInFlight: number;
}

/** An HTTP pod: slow on request, with a health endpoint that can fail, and an echoing upgrade (WebSocket-like tunnel). */
export async function appPod(name: string): Promise<AppPod> {
  const server = createHttpServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://pod");
    if (url.pathname === "/healthz") {
      res.statusCode = pod.health;
      res.end(String(pod.health));
      return;
    }
    pod.inFlight++;
    pod.maxInFlight = Math.max(pod.maxInFlight, pod.inFlight);
    setTimeout(
      () => {
        pod.inFlight--;
        res.end(`${name} ${req.url}`);
      },
      Number(url.searchParams.get("ms") ?? 0),
    );
  });
  server.on("upgrade", (_req, socket: Socket) => {
    socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n");
    socket.on("data", (d) => socket.write(d));
    socket.on("error", () => {});
  });
  const sockets = track(server);
  const pod: AppPod = {
    name,
    port: await listen(server),
    health: 200,
    inFlight: 0,
    maxInFlight: 0,
    close: closer(server, sockets),
  };
  return pod;
}

/** The source address a PROXY protocol header (v1 text or v2 binary) names, or `LOCAL` for a health check's v2 header. */
function parseProxyHeader(buf: Buffer): { source: string; rest: Buffer } | null {
  const v2sig = Buffer.from("0d0a0d0a000d0a515549540a", "hex");
  if (buf.length >= 16 && buf.subarray(0, 12).equals(v2sig)) {
    const length = buf.readUInt16BE(14);
    if (buf.length < 16 + length) return null;
    const cmd = buf[12]! & 0x0f;
    const family = buf[13]!;
    let source = "LOCAL";
    if (cmd === 1 && family === 0x11) source = `${[...buf.subarray(16, 20)].join(".")}:${buf.readUInt16BE(24)}`;
    else if (cmd === 1) source = `family 0x${family.toString(16)}`;
    return { source, rest: buf.subarray(16 + length) };
  }
  const end = buf.indexOf("\r\n");
  if (end < 0) return null;
  const words = buf.subarray(0, end).toString("latin1").split(" ");
  if (words[0] !== "PROXY") return { source: "no PROXY header", rest: buf };
  return { source: words[1] === "UNKNOWN" ? "LOCAL" : `${words[2]}:${words[4]}`, rest: buf.subarray(end + 2) };
}

/** A pod behind PROXY protocol: answers each HTTP request with the client address its header named. */
export async function proxyProtocolPod(): Promise<Pod & { headers: string[] }> {
  const headers: string[] = [];
  const server = createTcpServer((sock) => {
    let buf: Buffer = Buffer.alloc(0);
    let source: string | null = null;
    sock.on("error", () => {});
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      if (source === null) {
        const parsed = parseProxyHeader(buf);
        if (!parsed) return;
        source = parsed.source;
        headers.push(source);
        buf = parsed.rest;
      }
      if (buf.includes("\r\n\r\n")) {
        sock.end(
          `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(source)}\r\nconnection: close\r\n\r\n${source}`,
        );
      }
    });
  });
  const sockets = track(server);
  return { port: await listen(server), headers, close: closer(server, sockets) };
}

/** A cleartext HTTP/2 pod (prior knowledge, as gRPC uses it): answers like gRPC, with trailers. */
export async function h2Pod(): Promise<Pod & { versions: string[] }> {
  const versions: string[] = [];
  const server = createH2Server();
  server.on("stream", (stream: ServerHttp2Stream, headers) => {
    versions.push("2");
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () =>
      stream.sendTrailers({ "grpc-status": "0", "grpc-message": `path ${headers[":path"]}` }),
    );
    stream.end("h2 pod");
  });
  const sockets = track(server);
  return { port: await listen(server), versions, close: closer(server, sockets) };
}

/** A TLS pod (HTTP/1.1 or HTTP/2 by ALPN) that answers with the SNI and ALPN protocol it was given. */
export async function tlsPod(pemFile: string): Promise<Pod> {
  const pem = readFileSync(pemFile, "utf8");
  const server = createSecureServer({ cert: pem, key: pem, allowHTTP1: true }, (req, res) => {
    const tls = req.socket as TLSSocket;
    res.end(`sni=${tls.servername || "-"} alpn=${tls.alpnProtocol || "-"} http=${req.httpVersion}`);
  });
  const sockets = track(server);
  return { port: await listen(server), close: closer(server, sockets) };
}

export interface Answer {
  status: number;
  body: string;
  headers: IncomingHttpHeaders;
  /** The client's own address:port, as the pod should see it. */
  local: string;
}

/** One HTTP/1.1 request from a chosen loopback address (127.0.0.2 is as local as 127.0.0.1 on Linux). */
export function get(
  port: number,
  path: string,
  opts: { from?: string; host?: string; timeoutMs?: number } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let local = "";
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        localAddress: opts.from ?? "127.0.0.1",
        agent: false,
        headers: { connection: "close", ...(opts.host ? { host: opts.host } : {}) },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, local }));
      },
    );
    req.on("socket", (s) => s.on("connect", () => (local = `${s.localAddress}:${s.localPort}`)));
    req.on("error", reject);
    req.setTimeout(opts.timeoutMs ?? 10_000, () => req.destroy(new Error(`GET ${path} timed out`)));
    req.end();
  });
}

/** An HTTP/2 cleartext request to HAProxy (it detects the preface on a plain bind): status, body and trailers. */
export function h2Get(
  port: number,
  path: string,
): Promise<{ status: number; body: string; trailers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const session = h2connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
    });
    let status = 0;
    let body = "";
    let trailers: Record<string, unknown> = {};
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.on("trailers", (t) => (trailers = t));
    stream.setEncoding("utf8");
    stream.on("data", (c: string) => (body += c));
    stream.on("end", () => {
      session.close();
      resolve({ status, body, trailers });
    });
    stream.on("error", reject);
    stream.end("request");
  });
}
