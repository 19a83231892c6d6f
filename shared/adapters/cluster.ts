/*
 * The Kubernetes side of servicelb: load credentials, take a paged snapshot of Services and
 * endpoints in the exact JSON shape `kubectl get services,endpointslices -A -o json` prints, and
 * watch for changes (hints only; every reconcile re-lists). Errors become a ClusterError that
 * says whether retrying can help, so the caller can let its Broker retry or give up.
 */

import { createHash } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import * as http from "node:http";
import * as https from "node:https";
// client-node's own modules rather than its index, which re-exports every generated API (and so,
// through ObjectSerializer, every model). With rolldown.config.mjs's treeshake settings a bundle
// then carries only the generated code these modules use. Same classes as the index exports.
import { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { Watch } from "@kubernetes/client-node/dist/watch.js";
import { OptionsError } from "../core/settings.js";
import { type Backoff, backoffDelay } from "../core/backoff.js";
import { newerRevision } from "../core/revision.js";
import { DNS1123_LABEL, SERVICE_NAME_LABEL } from "../core/k8s-names.js";
import { TRANSIENT_NETWORK_CODES } from "./network-errors.js";

export type ClusterErrorKind = "unauthorized" | "forbidden" | "not-found" | "timeout" | "unavailable" | "bad-response";

/**
 * Nothing to read a cluster from. An OptionsError, whose message is the CLI's advice; a server
 * (the HTTP dry run) says instead what it needs, from `looked`.
 */
export class NoKubeconfigError extends OptionsError {
  constructor(readonly looked: string) {
    super(
      `no kubeconfig found (looked in ${looked}): pass --kubeconfig FILE, or --snapshot FILE to render without a cluster`,
    );
  }
}

export class ClusterError extends Error {
  override readonly name = "ClusterError";
  readonly kind: ClusterErrorKind;
  /** True when the same call may succeed later unchanged (timeouts, 5xx, 429, refused connections). */
  readonly transient: boolean;
  /** The HTTP status, when the server answered. */
  readonly status: number | undefined;

  constructor(
    kind: ClusterErrorKind,
    message: string,
    options: { transient: boolean; status?: number; cause?: unknown },
  ) {
    super(message, { cause: options.cause });
    this.kind = kind;
    this.transient = options.transient;
    this.status = options.status;
  }
}

export interface KubeItem {
  apiVersion: string;
  kind: string;
  metadata: Record<string, unknown>;
  [key: string]: unknown;
}

export interface KubeList {
  apiVersion: "v1";
  kind: "List";
  metadata: { resourceVersion: string };
  items: KubeItem[];
}

export interface ClusterSnapshot {
  list: KubeList;
  /** The highest list resourceVersion: the cluster revision this snapshot reflects ("0" if none). */
  revision: string;
  warnings: string[];
  stats: { pages: number; ms: number };
}

export interface ListClusterOptions {
  /** Only this namespace; all namespaces when absent. */
  namespace?: string;
  /** Applies to Services only: slices and Endpoints carry different labels. */
  labelSelector?: string;
  pageSize?: number;
  /** Per HTTP request, like kubectl's --request-timeout. */
  timeoutMs?: number;
  /** Ends the whole list (e.g. the reconcile pass's deadline). */
  signal?: AbortSignal;
}

export interface ClusterEvent {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: KubeItem;
}

export interface WatchClusterOptions {
  namespace?: string;
  onEvent: (event: ClusterEvent) => void;
  /** Reported, then the watch reconnects with backoff until stopped. */
  onError: (error: ClusterError) => void;
  /** The API server answered a watch request: it streams events from now on. */
  onConnect?: () => void;
  /**
   * Also watch the Gateway API kinds (GatewayClass, Gateway, HTTPRoute, ReferenceGrant). A
   * cluster without their CRDs answers 404, which is no error: their watches try again with backoff.
   */
  gatewayApi?: boolean;
}

const DEFAULT_PAGE_SIZE = 500;
const DEFAULT_TIMEOUT_MS = 30_000;
/** A continue token expires when the list outlives etcd compaction; restarting more rarely helps. */
const MAX_LIST_RESTARTS = 3;
/** Ask the server to end each watch so that a dead connection cannot go unnoticed for long. */
const WATCH_TIMEOUT_SECONDS = 300;
const WATCH_BACKOFF: Backoff = { initialMs: 500, maxMs: 30_000 };

type GatewayResource = "gatewayclasses" | "gateways" | "httproutes" | "referencegrants";
type ResourceName = "services" | "endpointslices" | "endpoints" | GatewayResource;

interface ResourceInfo {
  group: "" | "discovery.k8s.io" | "gateway.networking.k8s.io";
  apiVersion: string;
  kind: string;
  /** Cluster-scoped: listed across the cluster even when servicelb watches one namespace. */
  cluster?: boolean;
}

/** The Gateway API kinds a pass lists beside Services (core/gateway/), when the cluster serves them. */
const GATEWAY_RESOURCES: readonly GatewayResource[] = ["gatewayclasses", "gateways", "httproutes", "referencegrants"];

const RESOURCES: Record<ResourceName, ResourceInfo> = {
  services: { group: "", apiVersion: "v1", kind: "Service" },
  endpointslices: { group: "discovery.k8s.io", apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" },
  endpoints: { group: "", apiVersion: "v1", kind: "Endpoints" },
  gatewayclasses: {
    group: "gateway.networking.k8s.io",
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "GatewayClass",
    cluster: true,
  },
  gateways: { group: "gateway.networking.k8s.io", apiVersion: "gateway.networking.k8s.io/v1", kind: "Gateway" },
  httproutes: { group: "gateway.networking.k8s.io", apiVersion: "gateway.networking.k8s.io/v1", kind: "HTTPRoute" },
  referencegrants: {
    group: "gateway.networking.k8s.io",
    apiVersion: "gateway.networking.k8s.io/v1beta1",
    kind: "ReferenceGrant",
  },
};

/** What a failed call was doing, so that its error message can say what to fix. */
interface Target {
  resource: ResourceName;
  verb: "get" | "list" | "watch";
  namespace: string | undefined;
  /** The object a get reads. */
  name?: string;
  server: string;
  user: string;
  context: string;
  timeoutMs: number;
}

/**
 * In a pod (KUBERNETES_SERVICE_HOST set) with no kubeconfig given, the service account; else the
 * given file; else $KUBECONFIG or ~/.kube/config. An explicit $KUBECONFIG wins over in-cluster
 * config, as in client-go's loading rules.
 */
export function loadKubeConfig(options: { kubeconfig?: string; context?: string } = {}): KubeConfig {
  const { KUBECONFIG, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT } = process.env;
  const id = JSON.stringify([
    options.kubeconfig,
    options.context,
    KUBECONFIG,
    KUBERNETES_SERVICE_HOST,
    KUBERNETES_SERVICE_PORT,
  ]);
  const files = options.kubeconfig
    ? [options.kubeconfig]
    : !KUBECONFIG && KUBERNETES_SERVICE_HOST
      ? []
      : KUBECONFIG
        ? KUBECONFIG.split(delimiter)
        : [join(homedir(), ".kube", "config")];
  const stamp = files.map(fileStamp).join(";");
  const known = kubeConfigs.get(id);
  if (known?.stamp === stamp) return known.kc;
  const kc = readKubeConfig(options);
  kubeConfigs.set(id, { stamp, kc });
  return kc;
}

/**
 * Kubeconfigs as last read, while the files they came from are unchanged: a warm instance reads
 * and parses its kubeconfig once, not for every request (a head start sends two). A file
 * rewritten (a rotated credential, a new version of a mounted secret) is read again at the next
 * request. In a pod, client-node reads the service account's token file itself as it rotates.
 */
const kubeConfigs = new Map<string, { stamp: string; kc: KubeConfig }>();

function fileStamp(path: string): string {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return "absent";
  }
}

function readKubeConfig(options: { kubeconfig?: string; context?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfig) {
    if (!existsSync(options.kubeconfig))
      throw new OptionsError(`--kubeconfig / SERVICELB_KUBECONFIG: ${options.kubeconfig} does not exist`);
    kc.loadFromFile(options.kubeconfig);
  } else if (!process.env.KUBECONFIG && process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
  else {
    // With nothing to load, client-node falls back to http://localhost:8080 and then fails with
    // an unrelated TLS message; say what was looked for instead.
    const home = join(homedir(), ".kube", "config");
    if (!process.env.KUBECONFIG && !existsSync(home)) {
      throw new NoKubeconfigError(`$KUBECONFIG, ${home} and for an in-cluster service account`);
    }
    kc.loadFromDefault();
  }
  if (options.context !== undefined) {
    if (!kc.getContextObject(options.context)) {
      const known =
        kc
          .getContexts()
          .map((c) => `"${c.name}"`)
          .join(", ") || "none";
      throw new ClusterError(
        "not-found",
        `kubeconfig context "${options.context}" does not exist (known contexts: ${known})`,
        { transient: false },
      );
    }
    kc.setCurrentContext(options.context);
  }
  return kc;
}

export async function listCluster(kc: KubeConfig, options: ListClusterOptions = {}): Promise<ClusterSnapshot> {
  const { items, ...rest } = await listClusterItems(kc, options, (item) => item);
  return { list: { apiVersion: "v1", kind: "List", metadata: { resourceVersion: rest.revision }, items }, ...rest };
}

/**
 * The same lists, with every item handed to `keep` as its page arrives and only what `keep`
 * returns kept: a caller that needs a few fields of each object need not hold every page of raw
 * objects (with their managedFields and last-applied annotations) until the last one is in.
 */
export async function listClusterItems<T>(
  kc: KubeConfig,
  options: ListClusterOptions,
  keep: (item: KubeItem) => T,
): Promise<Omit<ClusterSnapshot, "list"> & { items: T[]; endpointKind: "EndpointSlice" | "Endpoints" }> {
  const started = performance.now();
  const limit = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const { namespace, labelSelector } = options;
  const stats = { pages: 0, ms: 0 };
  const warnings: string[] = [];
  // The lists run side by side; when one fails, the other is cancelled instead of left running.
  const { signal, target, cancelOnFailure } = sideBySide(kc, timeoutMs, options.signal);
  const list = (resource: ResourceName, selector?: string) =>
    listAll(
      (p) => rawListPage(kc, pathOf({ resource, namespace }), { ...p, labelSelector: selector }, signal()),
      limit,
      target(resource, namespace, "list"),
      stats,
      keep,
    );

  const services = list("services", labelSelector);
  let endpointKind: "EndpointSlice" | "Endpoints" = "EndpointSlice";
  const endpoints = (async () => {
    try {
      return await list("endpointslices");
    } catch (err) {
      if (!(err instanceof ClusterError && err.status === 404)) throw err;
      warnings.push(
        `the API server at ${kc.getCurrentCluster()?.server} does not serve EndpointSlices (discovery.k8s.io/v1 answered 404); ` +
          `using the deprecated v1 Endpoints API instead`,
      );
      endpointKind = "Endpoints";
      return list("endpoints");
    }
  })();
  // Clusters without the Gateway API CRDs answer 404: they have none of these objects. One whose
  // RBAC predates them (an older install) answers 403: its Services are served all the same. The
  // four small lists go one after another once the endpoints are in, beside the Services' list, so
  // a pass holds no more connections to the API server than it did without them.
  const gatewayLists = (async () => {
    await endpoints;
    const out: Array<{ items: T[]; revision: string }> = [];
    for (const resource of GATEWAY_RESOURCES) {
      try {
        out.push(await list(resource));
      } catch (err) {
        if (!(err instanceof ClusterError && (err.status === 404 || err.status === 403))) throw err;
        if (err.status === 403)
          warnings.push(
            `Gateway API ${resource} are not served: ${err.message} (grant list on them: infra/base/rbac.yaml)`,
          );
      }
    }
    return out;
  })();
  const [svc, eps, gateway] = await Promise.all([
    cancelOnFailure(services),
    cancelOnFailure(endpoints),
    cancelOnFailure(gatewayLists),
  ]);

  let revision = newerRevision(svc.revision, eps.revision);
  for (const g of gateway) if (g.revision) revision = newerRevision(revision, g.revision);
  stats.ms = Math.round(performance.now() - started);
  return {
    items: [...svc.items, ...eps.items, ...gateway.flatMap((g) => g.items)],
    revision,
    endpointKind,
    warnings,
    stats,
  };
}

/** An object an event named: a warm reconcile reads it again instead of the whole cluster. */
export interface ObjectRef {
  kind: "Service" | "EndpointSlice";
  namespace: string;
  name: string;
}

export interface ObjectReads<T> {
  /** Per ref, in order: the object as the API server has it now, or null when it has none. */
  objects: Array<{ ref: ObjectRef; item: T | null }>;
  /** Per Service ref: every EndpointSlice labelled as the Service's, as a list of them returns. */
  slicesOf: Array<{ namespace: string; service: string; items: T[] }>;
}

/**
 * Each named object by a GET of its own and, for a Service, its EndpointSlices by their label: a
 * few small reads where a full list reads every object. Every read goes to the API server, never
 * to the event that named the object: events are hints, and whoever can post one to the Broker
 * must not be able to route traffic. A namespace that is no namespace name is refused before
 * anything is sent; names are escaped into the path.
 */
export async function readObjects<T>(
  kc: KubeConfig,
  refs: readonly ObjectRef[],
  options: Pick<ListClusterOptions, "timeoutMs" | "signal">,
  keep: (item: KubeItem) => T,
): Promise<ObjectReads<T>> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const { signal, target, cancelOnFailure } = sideBySide(kc, timeoutMs, options.signal);
  for (const ref of refs)
    if (!DNS1123_LABEL.test(ref.namespace)) throw new Error(`${JSON.stringify(ref.namespace)} is not a namespace name`);
  const resourceOf = (kind: ObjectRef["kind"]): ResourceName => (kind === "Service" ? "services" : "endpointslices");
  const getOne = async (ref: ObjectRef) => {
    const resource = resourceOf(ref.kind);
    const path = `${pathOf({ resource, namespace: ref.namespace })}/${encodeURIComponent(ref.name)}`;
    try {
      const obj = (await getRaw(kc, path, {}, signal())) as Record<string, unknown>;
      return { ref, item: keep(withTypeMeta(obj, RESOURCES[resource])) };
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return { ref, item: null };
      throw toClusterError(err, { ...target(resource, ref.namespace, "get"), name: ref.name });
    }
  };
  const slicesOf = async (ref: ObjectRef) => {
    const { items } = await listAll(
      (p) =>
        rawListPage(
          kc,
          pathOf({ resource: "endpointslices", namespace: ref.namespace }),
          { ...p, labelSelector: `${SERVICE_NAME_LABEL}=${ref.name}` },
          signal(),
        ),
      DEFAULT_PAGE_SIZE,
      target("endpointslices", ref.namespace, "list"),
      { pages: 0 },
      keep,
    );
    return { namespace: ref.namespace, service: ref.name, items };
  };
  const [objects, slices] = await Promise.all([
    Promise.all(refs.map((ref) => cancelOnFailure(getOne(ref)))),
    Promise.all(refs.filter((r) => r.kind === "Service").map((ref) => cancelOnFailure(slicesOf(ref)))),
  ]);
  return { objects, slicesOf: slices };
}

/**
 * For requests sent side by side: a signal per request (its own timeout, the caller's signal, and
 * the cancellation of all of them), the target its error message names, and a wrapper that cancels
 * the others when one fails instead of leaving them running.
 */
function sideBySide(kc: KubeConfig, timeoutMs: number, outer: AbortSignal | undefined) {
  const cancel = new AbortController();
  const signal = () => AbortSignal.any([timeoutSignal(timeoutMs), cancel.signal, ...(outer ? [outer] : [])]);
  const target = (resource: ResourceName, namespace: string | undefined, verb: Target["verb"]): Target => ({
    ...targetOf(kc),
    resource,
    verb,
    namespace,
    timeoutMs,
  });
  const cancelOnFailure = <R>(p: Promise<R>) =>
    p.catch((err: unknown) => {
      cancel.abort();
      throw err;
    });
  return { signal, target, cancelOnFailure };
}

/**
 * The cluster's current revision, by the cheapest consistent read there is: a list of one
 * Service (the list's resourceVersion is the store's revision, whatever the page holds). The
 * reconcile pass asks it to tell a cluster whose revisions went back from a stale pass.
 */
export async function readClusterRevision(
  kc: KubeConfig,
  options: Pick<ListClusterOptions, "namespace" | "timeoutMs" | "signal"> = {},
): Promise<string> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const target: Target = {
    ...targetOf(kc),
    resource: "services",
    verb: "list",
    namespace: options.namespace,
    timeoutMs,
  };
  const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), ...(options.signal ? [options.signal] : [])]);
  try {
    const page = await rawListPage(kc, pathOf(target), { limit: 1 }, signal);
    return page.metadata?.resourceVersion || "0";
  } catch (err) {
    throw toClusterError(err, target);
  }
}

/**
 * Watch Services and EndpointSlices (v1 Endpoints when the cluster has no EndpointSlice API), and
 * with `gatewayApi` the Gateway API kinds, reconnecting from the last seen resourceVersion.
 * Returns a function that stops every watch.
 */
export function watchCluster(kc: KubeConfig, options: WatchClusterOptions): () => void {
  const resources: ResourceName[] = ["services", "endpointslices", ...(options.gatewayApi ? GATEWAY_RESOURCES : [])];
  const stops = resources.map((resource) => watchResource(kc, resource, options));
  return () => {
    for (const stop of stops) stop();
  };
}

/**
 * Aborts after `ms`, as AbortSignal.timeout does, but on the global setTimeout: Node keeps
 * AbortSignal.timeout's timer internal, out of reach of fake timers, and a test of the timeout
 * must hold the clock while the requests that should succeed are answered.
 */
function timeoutSignal(ms: number): AbortSignal {
  const controller = new AbortController();
  setTimeout(
    () => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    ms,
  ).unref();
  return controller.signal;
}

type PageParams = { limit: number; continue?: string };
type Page = {
  metadata?: { resourceVersion?: string; continue?: string };
  items: Array<Record<string, unknown>> | null;
};

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

async function rawListPage(
  kc: KubeConfig,
  path: string,
  params: PageParams & { labelSelector?: string },
  signal: AbortSignal,
): Promise<Page> {
  return (await getRaw(
    kc,
    path,
    { limit: String(params.limit), continue: params.continue, labelSelector: params.labelSelector },
    signal,
  )) as Page;
}

/** Every page of one list; an expired continue token restarts the list so that it stays consistent. */
async function listAll<T>(
  fetchPage: (params: PageParams) => Promise<Page>,
  limit: number,
  target: Target,
  stats: { pages: number },
  keep: (item: KubeItem) => T,
): Promise<{ items: T[]; revision: string }> {
  const info = RESOURCES[target.resource];
  for (let restarts = 0; ; restarts++) {
    const items: T[] = [];
    let revision = "";
    let token: string | undefined;
    try {
      do {
        const page = await fetchPage({ limit, continue: token });
        stats.pages++;
        // Every page of a list reports the revision of its first page.
        revision ||= page.metadata?.resourceVersion ?? "";
        for (const obj of page.items ?? []) items.push(keep(withTypeMeta(obj, info)));
        token = page.metadata?.continue || undefined;
      } while (token);
      return { items, revision };
    } catch (err) {
      if (!(token && err instanceof ApiException && err.code === 410)) throw toClusterError(err, target);
      if (restarts === MAX_LIST_RESTARTS) {
        throw new ClusterError(
          "unavailable",
          `listing ${target.resource} on ${target.server}: the continue token expired ${restarts + 1} times (410) before the list completed; ` +
            `the list takes longer than the server keeps a snapshot: use a larger page size`,
          { transient: true, status: 410, cause: err },
        );
      }
    }
  }
}

function withTypeMeta(obj: Record<string, unknown>, info: ResourceInfo): KubeItem {
  const { apiVersion: _apiVersion, kind: _kind, metadata, ...rest } = obj;
  return {
    apiVersion: info.apiVersion,
    kind: info.kind,
    metadata: (metadata ?? {}) as Record<string, unknown>,
    ...rest,
  };
}

/** Where a call goes, for its error message: the kubeconfig's server, user and context. */
function targetOf(kc: KubeConfig): Pick<Target, "server" | "user" | "context"> {
  return {
    server: kc.getCurrentCluster()?.server ?? "(no cluster)",
    user: kc.getCurrentUser()?.name ?? "",
    context: kc.getCurrentContext(),
  };
}

function pathOf(t: Pick<Target, "resource" | "namespace">): string {
  const info = RESOURCES[t.resource];
  const prefix = info.group ? `/apis/${info.apiVersion}` : "/api/v1";
  return t.namespace === undefined || info.cluster
    ? `${prefix}/${t.resource}`
    : `${prefix}/namespaces/${t.namespace}/${t.resource}`;
}

function toClusterError(err: unknown, t: Target): ClusterError {
  if (err instanceof ClusterError) return err;
  const request = `${t.verb} ${t.server}${pathOf(t)}${t.name === undefined ? "" : `/${t.name}`}`;
  // ApiException from the generated API; failures of a Watch carry statusCode instead.
  const status = err instanceof ApiException ? err.code : (err as { statusCode?: unknown })?.statusCode;
  if (typeof status === "number") {
    const said = serverMessage((err as { body?: unknown }).body);
    const detail = said ? `: ${said}` : "";
    const opts = { status, cause: err };
    if (status === 401) {
      return new ClusterError(
        "unauthorized",
        `the API server rejected the credentials (401) for ${request}: the token or client certificate of kubeconfig user ` +
          `"${t.user}" (context "${t.context}") is missing, expired or wrong`,
        { ...opts, transient: false },
      );
    }
    if (status === 403) {
      const { group } = RESOURCES[t.resource];
      const scope = t.namespace === undefined ? "cluster-wide" : `in namespace "${t.namespace}"`;
      return new ClusterError(
        "forbidden",
        `forbidden (403): ${request}${detail}. RBAC: grant "${t.verb}" on "${t.resource}" (group "${group}") ${scope}`,
        { ...opts, transient: false },
      );
    }
    if (status === 404) {
      return new ClusterError("not-found", `the API server does not serve ${request} (404)${detail}`, {
        ...opts,
        transient: false,
      });
    }
    if (status === 429 || status >= 500) {
      return new ClusterError("unavailable", `the API server answered ${status} to ${request}${detail}`, {
        ...opts,
        transient: true,
      });
    }
    return new ClusterError("bad-response", `the API server answered ${status} to ${request}${detail}`, {
      ...opts,
      transient: false,
    });
  }
  const e = err as { name?: unknown; code?: unknown; message?: unknown };
  if (e?.name === "AbortError") {
    return new ClusterError(
      "timeout",
      `no answer within ${t.timeoutMs} ms from the API server at ${t.server} (${request})`,
      {
        transient: true,
        cause: err,
      },
    );
  }
  const message = typeof e?.message === "string" ? e.message : String(err);
  if (typeof e?.code === "string" && TRANSIENT_NETWORK_CODES.has(e.code)) {
    return new ClusterError("unavailable", `cannot reach the API server at ${t.server} (${request}): ${message}`, {
      transient: true,
      cause: err,
    });
  }
  if (err instanceof SyntaxError) {
    return new ClusterError("bad-response", `the API server's answer to ${request} is not valid JSON: ${message}`, {
      transient: false,
      cause: err,
    });
  }
  // TLS verification failures, kubeconfig problems: retrying the same call cannot help.
  return new ClusterError("unavailable", `${request} failed: ${message}`, { transient: false, cause: err });
}

/** The HTTP status of a failed watch request, when the server answered. */
function statusOf(err: unknown): unknown {
  return err instanceof ApiException ? err.code : (err as { statusCode?: unknown })?.statusCode;
}

/** The message of a Status body, which client-node hands over as unparsed text. */
function serverMessage(body: unknown): string | undefined {
  let value = Buffer.isBuffer(body) ? body.toString("utf8") : body;
  if (typeof value === "string") {
    const text = value;
    try {
      value = JSON.parse(text);
    } catch {
      return text.trim().slice(0, 300) || undefined;
    }
  }
  const message = (value as { message?: unknown } | null)?.message;
  return typeof message === "string" ? message : undefined;
}

function watchResource(kc: KubeConfig, initial: ResourceName, options: WatchClusterOptions): () => void {
  let resource: ResourceName = initial;
  let resourceVersion: string | undefined;
  let controller: AbortController | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failures = 0;

  const target = (): Target => ({
    ...targetOf(kc),
    resource,
    verb: "watch",
    namespace: options.namespace,
    timeoutMs: WATCH_TIMEOUT_SECONDS * 1000,
  });

  const reconnect = (failed: boolean) => {
    failures = failed ? failures + 1 : 0;
    const delay = failures === 0 ? 0 : backoffDelay(WATCH_BACKOFF, failures);
    timer = setTimeout(() => void connect(), delay);
  };

  const onEvent = (type: string, obj: unknown) => {
    if (type === "ERROR") {
      // 410: our resourceVersion was compacted away; start over from the current state.
      if ((obj as { code?: unknown })?.code === 410) resourceVersion = undefined;
      else options.onError(toClusterError({ statusCode: (obj as { code?: unknown })?.code, body: obj }, target()));
      return;
    }
    if (type !== "ADDED" && type !== "MODIFIED" && type !== "DELETED") return;
    const item = withTypeMeta(obj as Record<string, unknown>, RESOURCES[resource]);
    resourceVersion = (item.metadata.resourceVersion as string | undefined) ?? resourceVersion;
    failures = 0;
    options.onEvent({ type, object: item });
  };

  const connect = async () => {
    if (stopped) return;
    const startedAt = Date.now();
    let failed = false;
    const onDone = (err: unknown) => {
      failed ||= Boolean(err);
      if (stopped) return;
      if (err && resource === "endpointslices" && (err as { statusCode?: unknown }).statusCode === 404) {
        resource = "endpoints";
        resourceVersion = undefined;
        return reconnect(false);
      }
      // A cluster without the Gateway API CRDs: none of these objects, nothing to report.
      const absent = err && RESOURCES[resource].group === "gateway.networking.k8s.io" && statusOf(err) === 404;
      if (err && !absent) options.onError(toClusterError(err, target()));
      // A stream that ends at once is failing even without an error; do not spin on it.
      reconnect(Boolean(err) || Date.now() - startedAt < 1000);
    };
    try {
      controller = await new Watch(kc).watch(
        pathOf({ resource, namespace: options.namespace }),
        { resourceVersion, timeoutSeconds: WATCH_TIMEOUT_SECONDS },
        onEvent,
        onDone,
      );
      if (stopped) controller.abort();
      // Watch.watch resolves once the server answered 200, or after reporting its failure.
      else if (!failed) options.onConnect?.();
    } catch (err) {
      onDone(err);
    }
  };

  void connect();
  return () => {
    stopped = true;
    clearTimeout(timer);
    controller?.abort();
  };
}
