import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * A store that answers slowly: an HTTP proxy in front of a real S3 server (s3rver) that, per
 * request, passes the answer through, drips it (headers at once, then one byte every
 * `dripMs`, as a store on a bad link or a throttling middlebox does: no idle timeout ever
 * fires), stalls it (accepts the request and never answers), or strips its Content-Length
 * (the body arrives chunked, as from a store that does not say its size), or refuses it with an
 * S3 error (`refuseStatus`: 400 InvalidDigest by default, as a store that does not take an
 * unsigned payload answers).
 */

export type Mode = "pass" | "drip" | "stall" | "chunked" | "refuse";

export interface DripProxy {
  endpoint: string;
  /** Decides the mode of each request, e.g. drip only GETs of configs. */
  mode: (req: IncomingMessage) => Mode;
  dripMs: number;
  /** The status a refused request gets; default 400 (InvalidDigest). */
  refuseStatus: number;
  /** Requests that arrived, in order: method, path, the mode they got and their SigV4 payload hash. */
  readonly seen: Array<{ method: string; path: string; mode: Mode; payload?: string }>;
  /** Requests being dripped or stalled right now. */
  readonly held: number;
  stop(): Promise<void>;
}

export async function dripProxy(upstream: string): Promise<DripProxy> {
  const target = new URL(upstream);
  const sockets = new Set<Socket>();
  let held = 0;
  const proxy: DripProxy = {
    endpoint: "",
    mode: () => "pass",
    dripMs: 100,
    refuseStatus: 400,
    seen: [],
    get held() {
      return held;
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  function hold(res: ServerResponse): () => void {
    held++;
    let released = false;
    const release = () => {
      if (!released) held--;
      released = true;
    };
    res.on("close", release);
    return release;
  }

  function drip(upstreamRes: IncomingMessage, res: ServerResponse): void {
    const release = hold(res);
    res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
    let pending = Buffer.alloc(0);
    upstreamRes.on("data", (c: Buffer) => (pending = Buffer.concat([pending, c])));
    let ended = false;
    upstreamRes.on("end", () => (ended = true));
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      if (pending.length > 0) {
        res.write(pending.subarray(0, 1));
        pending = pending.subarray(1);
      } else if (ended) {
        clearInterval(timer);
        release();
        res.end();
      }
    }, proxy.dripMs);
    res.on("close", () => clearInterval(timer));
  }

  const server = createServer((req, res) => {
    const mode = proxy.mode(req);
    const payload = req.headers["x-amz-content-sha256"];
    proxy.seen.push({
      method: req.method ?? "",
      path: req.url ?? "",
      mode,
      ...(payload ? { payload: String(payload) } : {}),
    });
    if (mode === "refuse") {
      req.resume();
      const [code, message] =
        proxy.refuseStatus === 400
          ? ["InvalidDigest", "UNSIGNED-PAYLOAD PUT is not allowed"]
          : ["InternalError", "refused"];
      res.writeHead(proxy.refuseStatus, { "content-type": "application/xml" });
      res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`);
      return;
    }
    if (mode === "stall") {
      hold(res);
      req.resume();
      return;
    }
    const up = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (upstreamRes) => {
        if (mode === "drip") return drip(upstreamRes, res);
        const headers = { ...upstreamRes.headers };
        if (mode === "chunked") delete headers["content-length"];
        res.writeHead(upstreamRes.statusCode ?? 502, headers);
        upstreamRes.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  proxy.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
