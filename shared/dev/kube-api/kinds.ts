/*
 * The kinds the Kubernetes API emulator serves, as a cluster with the Gateway API CRDs installed
 * serves them: each kind's resource, API group and version, list kind, scope and whether it has a
 * status subresource; and the shape of the objects it stores.
 */

export type Kind =
  | "Service"
  | "EndpointSlice"
  | "Endpoints"
  | "GatewayClass"
  | "Gateway"
  | "HTTPRoute"
  | "ReferenceGrant";
export type Resource =
  | "services"
  | "endpointslices"
  | "endpoints"
  | "gatewayclasses"
  | "gateways"
  | "httproutes"
  | "referencegrants";

interface KindInfo {
  resource: Resource;
  group: "" | "discovery.k8s.io" | "gateway.networking.k8s.io";
  apiVersion: string;
  listKind: string;
  /** Cluster-scoped: no namespace, paths without `namespaces/<ns>/`. */
  cluster?: boolean;
  /** Has a status subresource: writes to the object keep its status, `…/status` writes only that. */
  status?: boolean;
}

export const GATEWAY_GROUP = "gateway.networking.k8s.io";

export const KINDS: Record<Kind, KindInfo> = {
  Service: { resource: "services", group: "", apiVersion: "v1", listKind: "ServiceList" },
  Endpoints: { resource: "endpoints", group: "", apiVersion: "v1", listKind: "EndpointsList" },
  EndpointSlice: {
    resource: "endpointslices",
    group: "discovery.k8s.io",
    apiVersion: "discovery.k8s.io/v1",
    listKind: "EndpointSliceList",
  },
  GatewayClass: {
    resource: "gatewayclasses",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1`,
    listKind: "GatewayClassList",
    cluster: true,
    status: true,
  },
  Gateway: {
    resource: "gateways",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1`,
    listKind: "GatewayList",
    status: true,
  },
  HTTPRoute: {
    resource: "httproutes",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1`,
    listKind: "HTTPRouteList",
    status: true,
  },
  ReferenceGrant: {
    resource: "referencegrants",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1beta1`,
    listKind: "ReferenceGrantList",
  },
};

export const KIND_OF: Record<Resource, Kind> = {
  services: "Service",
  endpoints: "Endpoints",
  endpointslices: "EndpointSlice",
  gatewayclasses: "GatewayClass",
  gateways: "Gateway",
  httproutes: "HTTPRoute",
  referencegrants: "ReferenceGrant",
};

/** `<resource>.<group>` as the API server names a kind in its messages (`services` for the core group). */
export function groupResource(kind: Kind): string {
  const { resource, group } = KINDS[kind];
  return group ? `${resource}.${group}` : resource;
}

/** Where an object is stored: `<namespace>/<name>`, an empty namespace for a cluster-scoped kind. */
export function objectKey(kind: Kind, namespace: string | undefined, name: string): string {
  return `${KINDS[kind].cluster ? "" : (namespace ?? "")}/${name}`;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
  uid?: string;
  creationTimestamp?: string;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}
