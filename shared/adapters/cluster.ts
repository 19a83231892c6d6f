/*
 * What servicelb reads from a Kubernetes cluster: a paged snapshot of Services and endpoints in
 * the exact JSON shape `kubectl get services,endpointslices -A -o json` prints, single objects
 * read again, and the cluster's revision. Credentials come from kube-config.ts, each GET goes out
 * through kube-get.ts, and a failure becomes a ClusterError (cluster-error.ts); the local stack's
 * watch (dev/cluster-watch.ts) builds on the same parts.
 */

// client-node's own modules rather than its index, which re-exports every generated API (and so,
// through ObjectSerializer, every model). With rolldown.config.mjs's treeshake settings a bundle
// then carries only the generated code these modules use. Same classes as the index exports.
import type { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { timeoutSignal } from "../core/deadline.js";
import {
  ClusterError,
  GATEWAY_RESOURCES,
  pathOf,
  RESOURCES,
  type ResourceInfo,
  type ResourceName,
  type Target,
  targetOf,
  toClusterError,
} from "./cluster-error.js";
import { getRaw } from "./kube-get.js";
import { newerRevision } from "../core/publish/revision.js";
import { DNS1123_LABEL, SERVICE_NAME_LABEL } from "../core/kubernetes/k8s-names.js";

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

const DEFAULT_PAGE_SIZE = 500;
const DEFAULT_TIMEOUT_MS = 30_000;
/** A continue token expires when the list outlives etcd compaction; restarting more rarely helps. */
const MAX_LIST_RESTARTS = 3;

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

type PageParams = { limit: number; continue?: string };
type Page = {
  metadata?: { resourceVersion?: string; continue?: string };
  items: Array<Record<string, unknown>> | null;
};

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

export function withTypeMeta(obj: Record<string, unknown>, info: ResourceInfo): KubeItem {
  const { apiVersion: _apiVersion, kind: _kind, metadata, ...rest } = obj;
  return {
    apiVersion: info.apiVersion,
    kind: info.kind,
    metadata: (metadata ?? {}) as Record<string, unknown>,
    ...rest,
  };
}
