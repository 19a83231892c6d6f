import { randomUUID } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { watchCluster, type ClusterEvent } from "../adapters/cluster.js";
import type { Logger } from "../adapters/log.js";
import { PING_EVENT_TYPE } from "../core/event-types.js";
import { deliveryGate, type DeliveryPolicy } from "./delivery-policy.js";
import { trace } from "../adapters/trace.js";

const VERB: Record<ClusterEvent["type"], string> = { ADDED: "add", MODIFIED: "update", DELETED: "delete" };
const RESOURCE: Record<string, string> = { Service: "services", EndpointSlice: "endpointslices", Endpoints: "endpoints" };

export interface EventBridgeOptions {
  kc: KubeConfig;
  /** The reconcile function's URL. */
  sink: string;
  namespace?: string;
  /** PingSource's role: a resync on a timer, so that a lost event costs only time. */
  resyncMs: number;
  /** When watch events are handed on (default: servicelb's own, at once). Resync ticks are never held back. */
  policy?: DeliveryPolicy;
  log: Logger;
}

/** A CloudEvent in binary mode, as Knative's Broker delivers it to a Trigger's subscriber. */
async function send(sink: string, type: string, source: string, data: unknown, extensions: Record<string, string> = {}): Promise<number> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "ce-specversion": "1.0",
    "ce-id": randomUUID(),
    "ce-type": type,
    "ce-source": source,
    "ce-time": new Date().toISOString(),
  };
  for (const [k, v] of Object.entries(extensions)) headers[`ce-${k}`] = v;
  const r = await fetch(sink, { method: "POST", headers, body: JSON.stringify(data), signal: AbortSignal.timeout(30_000) });
  await r.arrayBuffer();
  return r.status;
}

/**
 * The local stand-in for Knative's ApiServerSource (Resource mode) and PingSource: watches
 * Services and EndpointSlices and posts each change to the reconcile function as the same
 * CloudEvent the cluster would send, plus a resync tick. Returns a function that stops it.
 */
export function startEventBridge(o: EventBridgeOptions): () => void {
  const server = o.kc.getCurrentCluster()?.server ?? "local";
  const deliver = (type: string, data: unknown, extensions?: Record<string, string>, rv?: unknown) =>
    send(o.sink, type, server, data, extensions).then(
      (status) => {
        trace("bridge", "delivered", { rv, type, status });
        if (status >= 300) o.log.warn({ type, status }, "reconcile refused an event; the next resync retries");
      },
      (err: Error) => o.log.warn({ type, err: err.message }, "reconcile unreachable; the next resync retries"),
    );
  const gate = deliveryGate<ClusterEvent>(o.policy ?? { name: "servicelb" }, (e) => {
      const meta = e.object.metadata as { name?: string; namespace?: string; resourceVersion?: string };
      const ns = meta.namespace ?? "default";
      const rv = meta.resourceVersion;
      void deliver(`dev.knative.apiserver.resource.${VERB[e.type]}`, e.object, {
        subject: `/apis/${e.object.apiVersion}/namespaces/${ns}/${RESOURCE[e.object.kind] ?? e.object.kind}/${meta.name ?? ""}`,
        kind: e.object.kind,
        name: meta.name ?? "",
        namespace: ns,
      }, rv);
  });
  const stopWatch = watchCluster(o.kc, {
    namespace: o.namespace,
    onEvent: (e) => {
      const meta = e.object.metadata as { name?: string; resourceVersion?: string };
      trace("bridge", "event", { rv: meta.resourceVersion, kind: e.object.kind, name: meta.name });
      gate.offer(e);
    },
    onError: (err) => o.log.warn({ err: err.message }, "watch failed; reconnecting"),
  });
  const ping = () => void deliver(PING_EVENT_TYPE, {});
  ping();
  const timer = setInterval(ping, o.resyncMs);
  return () => {
    clearInterval(timer);
    gate.stop();
    stopWatch();
  };
}
