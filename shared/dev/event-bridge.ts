import { randomUUID } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { type ClusterEvent, watchCluster } from "./cluster-watch.js";
import type { Logger } from "../adapters/log.js";
import { PING_EVENT_TYPE } from "../core/kubernetes/event-types.js";
import { NO_TRACE, type StageTrace } from "../adapters/stage-trace.js";

const VERB: Record<ClusterEvent["type"], string> = { ADDED: "add", MODIFIED: "update", DELETED: "delete" };
const RESOURCE: Record<string, string> = {
  Service: "services",
  EndpointSlice: "endpointslices",
  Endpoints: "endpoints",
  GatewayClass: "gatewayclasses",
  Gateway: "gateways",
  HTTPRoute: "httproutes",
  ReferenceGrant: "referencegrants",
};

export interface EventBridgeOptions {
  kc: KubeConfig;
  /** The reconcile function's URL. */
  sink: string;
  namespace?: string;
  /** PingSource's role: a resync on a timer, so that a lost event costs only time. */
  resyncMs: number;
  /**
   * What stands between a watch event and its delivery (bench/e2e puts a peer controller's update
   * policy there). Default: nothing, every event is delivered at once. Resync ticks never wait.
   */
  gate?: GateFactory;
  log: Logger;
  /** Stage timing of events and deliveries (bench/e2e, bench/storm); none by default. */
  trace?: StageTrace;
  /**
   * Deliveries in flight at most; the rest wait in the bridge, in order. Default: no bound, every
   * event is posted at once. A Broker's dispatcher delivers with bounded parallelism, and
   * bench/storm needs each delivery's own answer time, not its wait behind 100,000 others.
   */
  concurrency?: number;
}

/** Holds events back before `deliver`: each offered event is delivered now or as part of a later delivery. */
export interface Gate<T> {
  offer(event: T): void;
  stop(): void;
}

export type GateFactory = <T>(deliver: (event: T) => void) => Gate<T>;

const AT_ONCE: GateFactory = (deliver) => ({ offer: deliver, stop: () => undefined });

/**
 * An attribute's value as a header (CloudEvents HTTP binding 3.1.3.2): space, `"`, `%` and
 * everything outside printable ASCII percent-encoded, as UTF-8. A hand-made object's name may hold
 * a newline, which fetch refuses in a header outright, and the event would never be delivered.
 */
function headerValue(value: string): string {
  let out = "";
  for (const byte of Buffer.from(value, "utf8")) {
    out +=
      byte > 0x20 && byte < 0x7f && byte !== 0x22 && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** A CloudEvent in binary mode, as Knative's Broker delivers it to a Trigger's subscriber. */
async function send(
  sink: string,
  type: string,
  source: string,
  data: unknown,
  extensions: Record<string, string> = {},
): Promise<number> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "ce-specversion": "1.0",
    "ce-id": randomUUID(),
    "ce-type": type,
    "ce-source": headerValue(source),
    "ce-time": new Date().toISOString(),
  };
  for (const [k, v] of Object.entries(extensions)) headers[`ce-${k}`] = headerValue(v);
  const r = await fetch(sink, {
    method: "POST",
    headers,
    body: JSON.stringify(data),
    signal: AbortSignal.timeout(30_000),
  });
  await r.arrayBuffer();
  return r.status;
}

/** Runs at most `limit` deliveries at once, the others in the order they came; no bound when undefined. */
function deliveryLimit(limit: number | undefined): (delivery: () => Promise<void>) => Promise<void> {
  if (limit === undefined) return (delivery) => delivery();
  if (!(Number.isInteger(limit) && limit > 0))
    throw new Error(`the event bridge's concurrency must be a whole number above 0, not ${limit}`);
  const waiting: Array<() => void> = [];
  let running = 0;
  return async (delivery) => {
    // A finished delivery hands its slot to the next in line, so that a new one cannot take it first.
    if (running >= limit) await new Promise<void>((turn) => waiting.push(turn));
    else running++;
    try {
      await delivery();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/**
 * The local stand-in for Knative's ApiServerSources (Resource mode) and PingSource: watches
 * Services, EndpointSlices and the Gateway API kinds (infra/base/eventing.yaml's two sources) and
 * posts each change to the reconcile function as the same
 * CloudEvent the cluster would send, plus a resync tick. Returns a function that stops it.
 */
export function startEventBridge(o: EventBridgeOptions): () => void {
  const server = o.kc.getCurrentCluster()?.server ?? "local";
  const trace = o.trace ?? NO_TRACE;
  const inFlight = deliveryLimit(o.concurrency);
  const deliver = (type: string, data: unknown, extensions?: Record<string, string>, rv?: unknown) =>
    inFlight(() => {
      const sent = performance.now();
      const ms = () => Math.round((performance.now() - sent) * 10) / 10;
      return send(o.sink, type, server, data, extensions).then(
        (status) => {
          trace("delivered", { rv, type, status, ms: ms() });
          if (status >= 300) o.log.warn({ type, status }, "reconcile refused an event; the next resync retries");
        },
        (err: Error) => {
          trace("delivered", { rv, type, status: 0, ms: ms(), error: err.message });
          o.log.warn({ type, err: err.message }, "reconcile unreachable; the next resync retries");
        },
      );
    });
  const gate = (o.gate ?? AT_ONCE)<ClusterEvent>((e) => {
    const meta = e.object.metadata as { name?: string; namespace?: string; resourceVersion?: string };
    const rv = meta.resourceVersion;
    // A cluster-scoped object (a GatewayClass) has no namespace in its path nor in its event.
    const where = meta.namespace === undefined ? "" : `namespaces/${meta.namespace}/`;
    void deliver(
      `dev.knative.apiserver.resource.${VERB[e.type]}`,
      e.object,
      {
        subject: `/apis/${e.object.apiVersion}/${where}${RESOURCE[e.object.kind] ?? e.object.kind}/${meta.name ?? ""}`,
        kind: e.object.kind,
        name: meta.name ?? "",
        ...(meta.namespace !== undefined ? { namespace: meta.namespace } : {}),
      },
      rv,
    );
  });
  // Whether the API server answers, as the watches find out. A cluster that is down is said once,
  // and once more when it answers again; the watches meanwhile retry with backoff. Resync ticks wait
  // for an answer: a pass could only fail the same way, stack trace and all, every period.
  let answered = false;
  let down = false;
  const said = new Set<string>();
  const ping = () => void deliver(PING_EVENT_TYPE, {});
  const stopWatch = watchCluster(o.kc, {
    namespace: o.namespace,
    gatewayApi: true,
    onEvent: (e) => {
      const meta = e.object.metadata as { name?: string; resourceVersion?: string };
      trace("event", { rv: meta.resourceVersion, kind: e.object.kind, name: meta.name });
      gate.offer(e);
    },
    onConnect: () => {
      said.clear();
      if (down) o.log.info(`the API server at ${server} answers again: resyncing`);
      // The first answer is the initial sync; after an outage, the resync that was held back.
      if (down || !answered) ping();
      answered = true;
      down = false;
    },
    onError: (err) => {
      if (said.has(err.message)) return;
      said.add(err.message);
      if (!err.transient) {
        // It answered, with a refusal (RBAC, credentials): a pass may still list, and says why not.
        o.log.warn({ err: err.message }, "watch failed; retrying with backoff");
        if (!answered) ping();
        answered = true;
        return;
      }
      if (down) return;
      down = true;
      o.log.warn(`${err.message}. Nothing is reconciled until it answers; retrying with backoff (up to every 30 s)`);
    },
  });
  const timer = setInterval(() => {
    if (answered && !down) ping();
  }, o.resyncMs);
  return () => {
    clearInterval(timer);
    gate.stop();
    stopWatch();
  };
}
