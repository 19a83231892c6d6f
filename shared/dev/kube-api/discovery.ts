/*
 * The discovery documents client-node and kubectl read before a resource (`/version`, `/api`,
 * `/apis` and each group's resource list), for the groups this cluster serves.
 */
import { GATEWAY_GROUP } from "./kinds.js";
import type { ServedGroups } from "./paths.js";

function resources(groupVersion: string, list: Array<[string, string]>) {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion,
    resources: list.map(([name, kind]) => ({
      name,
      singularName: "",
      namespaced: true,
      kind,
      verbs: ["get", "list", "watch"],
    })),
  };
}

const DISCOVERY_GROUP = {
  name: "discovery.k8s.io",
  versions: [{ groupVersion: "discovery.k8s.io/v1", version: "v1" }],
  preferredVersion: { groupVersion: "discovery.k8s.io/v1", version: "v1" },
};

const GATEWAY_API_GROUP = {
  name: GATEWAY_GROUP,
  versions: [
    { groupVersion: `${GATEWAY_GROUP}/v1`, version: "v1" },
    { groupVersion: `${GATEWAY_GROUP}/v1beta1`, version: "v1beta1" },
  ],
  preferredVersion: { groupVersion: `${GATEWAY_GROUP}/v1`, version: "v1" },
};

/** The document at `path`, or undefined when it is no discovery path of this cluster. */
export function discoveryDocument(path: string, served: ServedGroups, port: number): object | undefined {
  switch (path) {
    case "/version":
      return { major: "1", minor: "33", gitVersion: "v1.33.0-fake", platform: "linux/amd64" };
    case "/api":
      return {
        kind: "APIVersions",
        versions: ["v1"],
        serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: `127.0.0.1:${port}` }],
      };
    case "/api/v1":
      return resources("v1", [
        ["services", "Service"],
        ["endpoints", "Endpoints"],
      ]);
    case "/apis":
      return {
        kind: "APIGroupList",
        apiVersion: "v1",
        groups: [
          ...(served.endpointSlices ? [DISCOVERY_GROUP] : []),
          ...(served.gatewayApi ? [GATEWAY_API_GROUP] : []),
        ],
      };
    case `/apis/${GATEWAY_GROUP}`:
      return served.gatewayApi ? { kind: "APIGroup", apiVersion: "v1", ...GATEWAY_API_GROUP } : undefined;
    case `/apis/${GATEWAY_GROUP}/v1`:
      return served.gatewayApi
        ? resources(`${GATEWAY_GROUP}/v1`, [
            ["gatewayclasses", "GatewayClass"],
            ["gateways", "Gateway"],
            ["httproutes", "HTTPRoute"],
          ])
        : undefined;
    case `/apis/${GATEWAY_GROUP}/v1beta1`:
      return served.gatewayApi
        ? resources(`${GATEWAY_GROUP}/v1beta1`, [["referencegrants", "ReferenceGrant"]])
        : undefined;
    case "/apis/discovery.k8s.io":
      return served.endpointSlices ? { kind: "APIGroup", apiVersion: "v1", ...DISCOVERY_GROUP } : undefined;
    case "/apis/discovery.k8s.io/v1":
      return served.endpointSlices
        ? resources("discovery.k8s.io/v1", [["endpointslices", "EndpointSlice"]])
        : undefined;
    default:
      return undefined;
  }
}
