/*
 * Watches Services and EndpointSlices (and the Gateway API kinds) for the local stack's event
 * bridge (dev/event-bridge.ts),
 * as a Kubernetes watch source of a cluster would: hints only, every reconcile pass re-lists.
 */

import type { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { Watch } from "@kubernetes/client-node/dist/watch.js";
import { type KubeItem, withTypeMeta } from "../adapters/cluster.js";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import {
  type ClusterError,
  GATEWAY_RESOURCES,
  pathOf,
  RESOURCES,
  type ResourceName,
  type Target,
  targetOf,
  toClusterError,
} from "../adapters/cluster-error.js";
import { type Backoff, backoffDelay } from "../core/backoff.js";

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

/** Ask the server to end each watch so that a dead connection cannot go unnoticed for long. */
const WATCH_TIMEOUT_SECONDS = 300;
const WATCH_BACKOFF: Backoff = { initialMs: 500, maxMs: 30_000 };

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

/** The HTTP status of a failed watch request, when the server answered. */
function statusOf(err: unknown): unknown {
  return err instanceof ApiException ? err.code : (err as { statusCode?: unknown })?.statusCode;
}
