/*
 * What an incoming CloudEvent means for the reconcile function. Events are hints, never data:
 * every event that may change the config leads to a full re-list, so all that matters here is
 * whether it can change the config at all. An event we cannot understand is acknowledged (the
 * Broker would otherwise retry a poison event until it dead-letters it); the PingSource resync
 * catches whatever such an event was about.
 *
 * Shapes, as Knative's ApiServerSource adapter (pkg/adapter/apiserver/events) sends them:
 * - type dev.knative.apiserver.resource.{add,update,delete}: data is the whole object;
 * - type dev.knative.apiserver.ref.{add,update,delete}: data is an ObjectReference
 *   {kind, namespace, name, apiVersion};
 * - source is the API server URL, subject "/apis/v1/namespaces/<ns>/<resource>/<name>", and the
 *   kind, name and namespace are copied into extensions for Trigger filters.
 * PingSource sends type dev.knative.sources.ping with whatever payload it was given.
 *
 * Some deliveries never reach the function: functions-framework refuses them while reading the
 * request (see app/unreadable-delivery.ts). The shipped sources never send them: the
 * ApiServerSource's data is always a JSON object, and the shipped PingSource sets JSON data.
 */

import { z } from "zod";
import type { RenderOptions } from "../core/settings/options.js";
import { PING_EVENT_TYPE, PUBSUB_TICK_TYPE } from "../core/kubernetes/event-types.js";
import { SERVICE_NAME_LABEL } from "../core/kubernetes/k8s-names.js";
import { GATEWAY_GROUP } from "../core/gateway/schemas.js";
import { eventHint } from "./event-hint.js";

const APISERVER_EVENT_TYPE = /^dev\.knative\.apiserver\.(resource|ref)\.(add|update|delete)$/;

export type Verdict = "resync" | "relevant" | "irrelevant" | "malformed" | "unknown";

export interface EventObject {
  apiVersion?: string;
  kind: string;
  namespace?: string;
  name: string;
  /** The Service the object belongs to, when it can be told from the event. */
  service?: string;
}

export interface Classification {
  verdict: Verdict;
  /** Why, in words fit for a log line. */
  reason: string;
  id?: string;
  type?: string;
  source?: string;
  object?: EventObject;
}

export type ScopeOptions = Pick<RenderOptions, "namespace" | "exposeSystem" | "targetService">;

const envelopeSchema = z.object({
  specversion: z.string().min(1),
  id: z.string().min(1),
  type: z.string().min(1),
  source: z.string().min(1),
  data: z.unknown().optional(),
});

const resourceDataSchema = z.object({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  metadata: z.object({
    name: z.string().min(1),
    namespace: z.string().min(1).optional(),
    labels: z.record(z.string(), z.string()).nullish(),
  }),
});

const refDataSchema = z.object({
  apiVersion: z.string().min(1).optional(),
  kind: z.string().min(1),
  namespace: z.string().min(1).optional(),
  name: z.string().min(1),
});

/** Reads only the event's hint (app/event-hint.ts): the event itself and its hint classify alike. */
export function classifyEvent(event: unknown, scope: ScopeOptions): Classification {
  const envelope = envelopeSchema.safeParse(eventHint(event));
  if (!envelope.success) return { verdict: "malformed", reason: `not a CloudEvent: ${issue(envelope.error)}` };
  const { id, type, source } = envelope.data;
  const base = { id, type, source };
  if (type === PING_EVENT_TYPE || type === PUBSUB_TICK_TYPE)
    return { ...base, verdict: "resync", reason: "periodic resync" };
  const mode = APISERVER_EVENT_TYPE.exec(type)?.[1];
  if (!mode) return { ...base, verdict: "unknown", reason: `event type ${type} is not one servicelb handles` };

  const data = envelope.data.data;
  let object: EventObject;
  if (mode === "resource") {
    const parsed = resourceDataSchema.safeParse(data);
    if (!parsed.success)
      return { ...base, verdict: "malformed", reason: `data is not a Kubernetes object: ${issue(parsed.error)}` };
    const { apiVersion, kind, metadata } = parsed.data;
    object = {
      apiVersion,
      kind,
      namespace: metadata.namespace,
      name: metadata.name,
      service: serviceOf(kind, metadata.name, metadata.labels ?? {}),
    };
  } else {
    const parsed = refDataSchema.safeParse(data);
    if (!parsed.success)
      return { ...base, verdict: "malformed", reason: `data is not an object reference: ${issue(parsed.error)}` };
    const { apiVersion, kind, namespace, name } = parsed.data;
    object = { apiVersion, kind, namespace, name, service: serviceOf(kind, name, {}) };
  }
  const outOfScope = whyIrrelevant(object, scope);
  return outOfScope
    ? { ...base, object, verdict: "irrelevant", reason: outOfScope }
    : { ...base, object, verdict: "relevant", reason: `${object.kind} changed` };
}

/**
 * Why the object cannot affect the config, or undefined when it may. Only immutable facts count
 * (kind, namespace, name): a Service whose labels stop matching --selector must still lead to a
 * re-list, or it would never leave the config.
 */
function whyIrrelevant(object: EventObject, scope: ScopeOptions): string | undefined {
  const group = readGroup(object);
  if (group === undefined)
    return `kind ${object.kind}${object.apiVersion ? ` (${object.apiVersion})` : ""} is not read by servicelb`;
  const ns = object.namespace;
  // A namespaced kind without a namespace is odd (a GatewayClass has none); when in doubt, re-list.
  if (ns === undefined) return undefined;
  if (scope.namespace && ns !== scope.namespace) return `namespace ${ns} is outside --namespace ${scope.namespace}`;
  // The rest scopes Services only: a Gateway API object anywhere may route to a Service in scope.
  if (group === GATEWAY_GROUP) return undefined;
  if (!scope.exposeSystem && ns === "kube-system") return "kube-system is not exposed (--expose-system)";
  if (!scope.exposeSystem && ns === "default" && object.service === "kubernetes")
    return "default/kubernetes is not exposed (--expose-system)";
  const target = scope.targetService;
  if (
    target &&
    object.service !== undefined &&
    !(target.includes("/") ? target === `${ns}/${object.service}` : target === object.service)
  ) {
    return `Service ${ns}/${object.service} is not --target-service ${target}`;
  }
  return undefined;
}

/** The Gateway API kinds a pass lists (core/gateway/); a change of any of them may change routing or status. */
const GATEWAY_KINDS = new Set(["GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant"]);

/**
 * The API group of a kind the snapshot is made of, or undefined for any other. The group matters:
 * Knative's own `Service` (serving.knative.dev) must not pass for a core Service. A reference
 * without an apiVersion is given the benefit of the doubt.
 */
function readGroup(object: EventObject): string | undefined {
  const group =
    object.apiVersion === undefined
      ? undefined
      : object.apiVersion.includes("/")
        ? object.apiVersion.split("/")[0]
        : "";
  if (object.kind === "Service" || object.kind === "Endpoints")
    return group === undefined || group === "" ? "" : undefined;
  if (object.kind === "EndpointSlice")
    return group === undefined || group === "discovery.k8s.io" ? "discovery.k8s.io" : undefined;
  if (GATEWAY_KINDS.has(object.kind)) return group === undefined || group === GATEWAY_GROUP ? GATEWAY_GROUP : undefined;
  return undefined;
}

/** The Service an object belongs to: a Service's own name, an EndpointSlice's label; none for other kinds. */
function serviceOf(kind: string, name: string, labels: Readonly<Record<string, string>>): string | undefined {
  if (kind === "EndpointSlice") return labels[SERVICE_NAME_LABEL];
  return kind === "Service" || kind === "Endpoints" ? name : undefined;
}

function issue(error: z.ZodError): string {
  const first = error.issues[0];
  return first ? `${first.path.join(".") || "value"}: ${first.message}` : "invalid";
}
