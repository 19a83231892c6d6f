/*
 * One GET (or a status subresource's PUT) against the Kubernetes API server, on keep-alive
 * connections shared across calls.
 */

import { createHash } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";
import type { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";

/**
 * One GET against the API server, answered as the API server wrote it, sent with client-node's
 * own TLS and authentication settings (token, client certificate, exec plugin). The typed API
 * would turn every item into model classes that we would serialize straight back to JSON (most of
 * the list's time at 10,000 Services, see BENCHMARKS.md, and two extra copies in memory); and its
 * generated clients bring every model into a bundle.
 */
export async function getRaw(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | undefined>,
  signal: AbortSignal,
): Promise<unknown> {
  return sendRaw(kc, "GET", path, query, undefined, signal);
}

/**
 * One PUT of a JSON body (a status subresource's replace, adapters/gateway-status.ts), sent as
 * getRaw sends a GET: the same credentials, agents and errors (ApiException with the status).
 */
export async function putRaw(kc: KubeConfig, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
  return sendRaw(kc, "PUT", path, {}, JSON.stringify(body), signal);
}

async function sendRaw(
  kc: KubeConfig,
  method: "GET" | "PUT",
  path: string,
  query: Record<string, string | undefined>,
  payload: string | undefined,
  signal: AbortSignal,
): Promise<unknown> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error("the kubeconfig names no cluster server");
  const url = new URL(server.replace(/\/+$/, "") + path);
  for (const [name, value] of Object.entries(query)) if (value) url.searchParams.set(name, value);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const agent = keepAliveAgent(url, opts);
  let answer: RawAnswer;
  try {
    answer = await send(url, { ...opts, agent, method }, payload, signal);
  } catch (err) {
    // The server may close an idle connection just as a request goes out on it (a function
    // instance frozen between events comes back to sockets the server has long closed): that
    // request never reached it, and it is safe to send again on a fresh connection (a GET, or a
    // PUT that names the resourceVersion it replaces).
    if (!(err instanceof StaleSocketError)) throw err;
    answer = await send(url, { ...opts, agent, method }, payload, signal);
  }
  const { status, headers, body } = answer;
  if (status < 200 || status >= 300) throw new ApiException(status, `HTTP ${status}`, body, headers);
  return JSON.parse(body);
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

class StaleSocketError extends Error {}

function send(
  url: URL,
  opts: https.RequestOptions,
  payload: string | undefined,
  signal: AbortSignal,
): Promise<RawAnswer> {
  const request = url.protocol === "https:" ? https.request : http.request;
  const headers: http.OutgoingHttpHeaders = {
    ...(opts.headers as http.OutgoingHttpHeaders | undefined),
    accept: "application/json",
  };
  if (payload !== undefined) {
    headers["content-type"] = "application/json";
    headers["content-length"] = Buffer.byteLength(payload);
  }
  return new Promise((resolve, reject) => {
    const req = request(url, { ...opts, signal, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers as Record<string, string>,
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
      res.on("error", reject);
    });
    req.on("error", (err: NodeJS.ErrnoException) =>
      reject(req.reusedSocket && err.code === "ECONNRESET" ? new StaleSocketError(err.message, { cause: err }) : err),
    );
    req.end(payload);
  });
}

/**
 * client-node hands every call a new Agent without keep-alive, so each page of each list was a
 * new TCP (and TLS) connection. Calls with the same server and TLS identity share one keep-alive
 * agent instead, across passes of a warm instance: a rotated client certificate gets a new one.
 * Proxy agents (a kubeconfig's proxy-url) are left as client-node made them.
 */
const agents = new Map<string, http.Agent>();
const MAX_AGENTS = 8;

function keepAliveAgent(url: URL, opts: https.RequestOptions): http.Agent | undefined {
  const given = opts.agent;
  if (typeof given === "object" && given.constructor !== http.Agent && given.constructor !== https.Agent) return given;
  const tls = [opts.ca, opts.cert, opts.key, opts.pfx, opts.passphrase, opts.rejectUnauthorized, opts.servername];
  const id = createHash("sha256")
    .update(`${url.protocol}//${url.host}\n${JSON.stringify(tls)}`)
    .digest("hex");
  let agent = agents.get(id);
  if (!agent) {
    const options = {
      keepAlive: true,
      ca: opts.ca,
      cert: opts.cert,
      key: opts.key,
      pfx: opts.pfx,
      passphrase: opts.passphrase,
      rejectUnauthorized: opts.rejectUnauthorized,
      servername: opts.servername,
    };
    agent = url.protocol === "https:" ? new https.Agent(options) : new http.Agent({ keepAlive: true });
    // Identities superseded by rotation are forgotten, oldest first (their idle sockets close
    // when the server closes them; a request still running on one is not cut).
    if (agents.size >= MAX_AGENTS) agents.delete(agents.keys().next().value!);
    agents.set(id, agent);
  }
  return agent;
}
