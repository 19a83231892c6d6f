/*
 * A call to the Kubernetes API server that failed, as a ClusterError that says what to fix and
 * whether retrying can help (the caller lets its Broker retry, or gives up); and what the call
 * was for its message: the resource, the verb, the server and the kubeconfig user.
 */

import type { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { TRANSIENT_NETWORK_CODES } from "./network-errors.js";

export type ClusterErrorKind = "unauthorized" | "forbidden" | "not-found" | "timeout" | "unavailable" | "bad-response";

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

export type GatewayResource = "gatewayclasses" | "gateways" | "httproutes" | "referencegrants";
export type ResourceName = "services" | "endpointslices" | "endpoints" | GatewayResource;

export interface ResourceInfo {
  group: "" | "discovery.k8s.io" | "gateway.networking.k8s.io";
  apiVersion: string;
  kind: string;
  /** Cluster-scoped: listed across the cluster even when servicelb watches one namespace. */
  cluster?: boolean;
}

/** The Gateway API kinds a pass lists beside Services (core/gateway/), when the cluster serves them. */
export const GATEWAY_RESOURCES: readonly GatewayResource[] = [
  "gatewayclasses",
  "gateways",
  "httproutes",
  "referencegrants",
];

export const RESOURCES: Record<ResourceName, ResourceInfo> = {
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
export interface Target {
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

/** Where a call goes, for its error message: the kubeconfig's server, user and context. */
export function targetOf(kc: KubeConfig): Pick<Target, "server" | "user" | "context"> {
  return {
    server: kc.getCurrentCluster()?.server ?? "(no cluster)",
    user: kc.getCurrentUser()?.name ?? "",
    context: kc.getCurrentContext(),
  };
}

export function pathOf(t: Pick<Target, "resource" | "namespace">): string {
  const info = RESOURCES[t.resource];
  const prefix = info.group ? `/apis/${info.apiVersion}` : "/api/v1";
  return t.namespace === undefined || info.cluster
    ? `${prefix}/${t.resource}`
    : `${prefix}/namespaces/${t.namespace}/${t.resource}`;
}

export function toClusterError(err: unknown, t: Target): ClusterError {
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
