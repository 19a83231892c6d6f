/*
 * Tells the agents that a new config is published. A ping is an optimisation only: agents poll
 * the store on their own timer (docs/design.md#invariant-4-converge-without-pings), so nothing
 * here ever throws; failures are logged and counted. A fleet is pinged a bounded number at a time
 * within an overall deadline, and the agent Service's EndpointSlices are listed once per
 * DISCOVERY_TTL_MS, not once per change: an agent not pinged in time, or not yet listed, converges
 * by its own poll.
 *
 * Pings go out over node:http with keep-alive sockets, not fetch(): each agent is an origin of its
 * own, and fetch's per-request and per-origin cost made a round of a thousand pings CPU-bound in
 * the notifier (BENCHMARKS.md, "Pings").
 */

import { readFile } from "node:fs/promises";
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { V1EndpointSlice } from "@kubernetes/client-node";
// Not the index: importing it at run time would put every generated API and model in the bundle.
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { getRaw } from "./kube-get.js";
import { loadKubeConfig } from "./kube-config.js";
import type { Logger } from "./log.js";
import { SERVICE_NAME_LABEL } from "../core/kubernetes/k8s-names.js";

export interface NotifierOptions {
  /** Static agent base URLs, e.g. http://10.0.0.1:8081. */
  agents: readonly string[];
  /** The agent Service; its EndpointSlices list the agents. */
  agentService?: { namespace: string; name: string };
  /** The slice port (by name) or a port number the agents listen on. Default "agent". */
  agentPort?: string | number;
  kube?: { kubeconfig?: string; context?: string };
  token?: string;
  /** Read at every notify: a rotated Secret takes effect without a restart. Wins over `token`. */
  tokenFile?: string;
  /** Per ping and for the slice list. Default 2000 ms. */
  timeoutMs?: number;
  /** Pings in flight at once. */
  concurrency: number;
  /** The whole round of pings; agents not pinged by then are counted, not pinged. */
  deadlineMs: number;
  /** Clock of the discovery cache (tests). */
  now?: () => number;
}

export interface NotifyPayload {
  key: string;
  sha256: string;
  revision: string;
}

export interface AgentPing {
  /** The agent's base URL. */
  agent: string;
  ok: boolean;
  status?: number;
  error?: string;
  ms: number;
}

export interface NotifyReport {
  agents: number;
  ok: number;
  failed: number;
  /** Agents left unpinged when the deadline came: they converge by their poll. */
  unpinged: number;
  /** Set when the agent Service could not be listed; the last list (or the static agents) was pinged. */
  discoveryError?: string;
  /** The first MAX_REPORTED_FAILURES failed pings: a report stays small however large the fleet. */
  failures: AgentPing[];
}

export interface Notifier {
  /** Agent base URLs: the static ones and those behind the agent Service, deduplicated, sorted. */
  discover(): Promise<{ agents: string[]; error?: string }>;
  notify(payload: NotifyPayload): Promise<NotifyReport>;
}

const DEFAULT_TIMEOUT_MS = 2000;
/** How long a listing of the agent Service is used: a node that joins is pinged within this, and polls meanwhile. */
export const DISCOVERY_TTL_MS = 30_000;
const MAX_REPORTED_FAILURES = 20;

export function createNotifier(options: NotifierOptions, log: Logger): Notifier {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const agentPort = options.agentPort ?? "agent";
  const { concurrency, deadlineMs } = options;
  const now = options.now ?? (() => performance.now());
  let listed: { at: number; urls: string[] } | undefined;
  // A socket per agent kept between rounds: a change a second after another reuses them.
  const sockets = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };

  async function fromService(ref: { namespace: string; name: string }): Promise<string[]> {
    const kc = loadKubeConfig(options.kube ?? {});
    const path = `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(ref.namespace)}/endpointslices`;
    const list = (await getRaw(
      kc,
      path,
      { labelSelector: `${SERVICE_NAME_LABEL}=${ref.name}` },
      AbortSignal.timeout(timeoutMs),
    )) as { items?: V1EndpointSlice[] | null };
    return (list.items ?? []).flatMap((slice) => agentUrls(slice, agentPort));
  }

  async function discover(): Promise<{ agents: string[]; error?: string }> {
    const found = new Set(options.agents.map((a) => a.replace(/\/+$/, "")));
    let error: string | undefined;
    if (options.agentService) {
      if (!listed || now() - listed.at >= DISCOVERY_TTL_MS) {
        try {
          listed = { at: now(), urls: await fromService(options.agentService) };
        } catch (err) {
          const { namespace, name } = options.agentService;
          error = `cannot list the EndpointSlices of agent Service ${namespace}/${name}: ${errorText(err)}`;
        }
      }
      for (const url of listed?.urls ?? []) found.add(url);
    }
    return { agents: [...found].sort(), error };
  }

  async function readToken(): Promise<string | undefined> {
    if (!options.tokenFile) return options.token;
    return (await readFile(options.tokenFile, "utf8")).trim();
  }

  async function ping(agent: string, body: string, token: string | undefined, waitMs: number): Promise<AgentPing> {
    const started = performance.now();
    const ms = () => Math.round(performance.now() - started);
    try {
      const status = await post(`${agent}/notify`, body, token, waitMs);
      return status >= 200 && status < 300
        ? { agent, ok: true, status, ms: ms() }
        : { agent, ok: false, status, error: `HTTP ${status}`, ms: ms() };
    } catch (err) {
      return { agent, ok: false, error: errorText(err), ms: ms() };
    }
  }

  /** POSTs the body; the answer's status once its body is drained (which frees the socket). */
  function post(url: string, body: string, token: string | undefined, waitMs: number): Promise<number> {
    const https = url.startsWith("https:");
    return new Promise<number>((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(
        url,
        {
          method: "POST",
          agent: https ? sockets.https : sockets.http,
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          signal: AbortSignal.timeout(waitMs),
        },
        (res: IncomingMessage) => {
          res.on("error", reject);
          res.on("end", () => resolve(res.statusCode ?? 0));
          res.resume();
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  }

  return {
    discover,
    async notify(payload) {
      const { agents, error: discoveryError } = await discover();
      if (discoveryError)
        log.warn(
          { err: discoveryError },
          "agent discovery failed; pinging the static agents only (agents poll anyway)",
        );
      let token: string | undefined;
      let tokenError: string | undefined;
      try {
        token = await readToken();
      } catch (err) {
        tokenError = `cannot read the notify token from ${options.tokenFile}: ${errorText(err)}`;
      }
      const body = JSON.stringify({ key: payload.key, sha256: payload.sha256, revision: payload.revision });
      const failures: AgentPing[] = [];
      let ok = 0;
      let failed = 0;
      const count = (p: AgentPing) => {
        if (p.ok) ok++;
        else if (failed++ < MAX_REPORTED_FAILURES) failures.push(p);
      };
      let next = 0;
      if (tokenError) {
        for (const agent of agents) count({ agent, ok: false, error: tokenError, ms: 0 });
        next = agents.length;
      } else {
        const end = performance.now() + deadlineMs;
        const worker = async () => {
          for (let left = end - performance.now(); next < agents.length && left > 0; left = end - performance.now())
            count(await ping(agents[next++]!, body, token, Math.min(timeoutMs, Math.ceil(left))));
        };
        await Promise.all(Array.from({ length: Math.min(concurrency, agents.length) }, worker));
      }
      const unpinged = agents.length - next;
      if (failed > 0 || unpinged > 0)
        log.warn(
          { agents: agents.length, ok, failed, unpinged, first: failures.slice(0, 5) },
          "some agents were not pinged; they converge by their poll",
        );
      return { agents: agents.length, ok, failed, unpinged, discoveryError, failures };
    },
  };
}

/**
 * Every endpoint of the slice, ready or not: an agent typically turns ready only once it serves a
 * config, so a not-yet-ready agent is exactly the one that wants the news. Terminating ones are left out.
 */
function agentUrls(slice: V1EndpointSlice, agentPort: string | number): string[] {
  const port = typeof agentPort === "number" ? agentPort : slice.ports?.find((p) => p.name === agentPort)?.port;
  if (port === undefined) return [];
  const ipv6 = slice.addressType === "IPv6";
  return (
    (slice.endpoints ?? [])
      .filter((ep) => ep.conditions?.terminating !== true)
      // The addresses of one endpoint are fungible (Kubernetes API docs): the first one is enough.
      .flatMap((ep) => ep.addresses.slice(0, 1))
      .map((address) => `http://${ipv6 ? `[${address}]` : address}:${port}`)
  );
}

/** A failed ping or list as its result says it: the HTTP status, "timed out", or the socket error. */
function errorText(err: unknown): string {
  if (err instanceof ApiException) return `HTTP ${err.code}`;
  if (!(err instanceof Error)) return String(err);
  // fetch() hides the socket error (ECONNREFUSED, ...) in its cause.
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = typeof cause?.code === "string" ? cause.code : undefined;
  // An aborted http.request reports AbortError with the signal's TimeoutError as its cause.
  const timedOut =
    err.name === "TimeoutError" ||
    (err.name === "AbortError" && (err.cause as { name?: unknown } | undefined)?.name === "TimeoutError");
  return timedOut ? "timed out" : code ? `${err.message} (${code})` : err.message;
}
