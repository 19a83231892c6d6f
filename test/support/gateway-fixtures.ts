/** Builders for Gateway API objects (gateway.networking.k8s.io) in their wire JSON shape, for tests. */
import type { KubeFixture } from "./fixtures.js";

const V1 = "gateway.networking.k8s.io/v1";
export const CLASS = "servicelb";

export function gatewayClass(name = CLASS, controllerName = "servicelb.io/gateway-controller"): KubeFixture {
  return { apiVersion: V1, kind: "GatewayClass", metadata: { name, namespace: "default" }, spec: { controllerName } };
}

export interface ListenerSpec {
  name: string;
  port: number;
  protocol?: string;
  hostname?: string;
  allowedRoutes?: unknown;
  tls?: unknown;
}

export function gateway(
  name: string,
  listeners: ListenerSpec[],
  opts: { namespace?: string; className?: string; generation?: number } = {},
): KubeFixture {
  return {
    apiVersion: V1,
    kind: "Gateway",
    metadata: { name, namespace: opts.namespace ?? "default", generation: opts.generation ?? 1 },
    spec: {
      gatewayClassName: opts.className ?? CLASS,
      listeners: listeners.map((l) => ({ protocol: "HTTP", ...l })),
    },
  };
}

export function httpRoute(
  name: string,
  spec: Record<string, unknown>,
  opts: { namespace?: string; generation?: number; created?: string } = {},
): KubeFixture {
  return {
    apiVersion: V1,
    kind: "HTTPRoute",
    metadata: {
      name,
      namespace: opts.namespace ?? "default",
      generation: opts.generation ?? 1,
      ...(opts.created ? { creationTimestamp: opts.created } : {}),
    },
    spec,
  };
}

export function referenceGrant(
  name: string,
  namespace: string,
  from: { namespace: string; kind?: string },
  to: { name?: string; kind?: string } = {},
): KubeFixture {
  return {
    apiVersion: "gateway.networking.k8s.io/v1beta1",
    kind: "ReferenceGrant",
    metadata: { name, namespace },
    spec: {
      from: [{ group: "gateway.networking.k8s.io", kind: from.kind ?? "HTTPRoute", namespace: from.namespace }],
      to: [{ group: "", kind: to.kind ?? "Service", ...(to.name ? { name: to.name } : {}) }],
    },
  };
}
