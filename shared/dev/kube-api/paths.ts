/*
 * What a request to the emulator names: the kind, namespace and object of its path (as the real
 * server lays its paths out, and only for the API groups this cluster serves), the label selector
 * of its query, and which stored objects fall in both.
 */
import { type LabelSelector, matchesSelector, parseLabelSelector } from "../../core/kubernetes/label-selector.js";
import { errorMessage } from "../../core/error-message.js";
import { GATEWAY_GROUP, KIND_OF, KINDS, type Kind, type KubeObject, type Resource } from "./kinds.js";
import { badRequest } from "./status-error.js";

export interface Route {
  kind: Kind;
  namespace: string | undefined;
  /** Set for an object path (…/namespaces/<ns>/<resource>/<name>): the target of PUT and DELETE. */
  name?: string;
  /** The object's status subresource (…/<name>/status). */
  status?: boolean;
}

/** The optional API groups a cluster serves: without one, its paths answer 404. */
export interface ServedGroups {
  endpointSlices: boolean;
  gatewayApi: boolean;
}

const GATEWAY_PATH = new RegExp(
  `^/apis/${GATEWAY_GROUP.replace(/\./g, "\\.")}/(v1|v1beta1)/(?:namespaces/([^/]+)/)?(gatewayclasses|gateways|httproutes|referencegrants)(?:/([^/]+))?(/status)?$`,
);
const CORE_PATH = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?(services|endpoints)(?:\/([^/]+))?$/;
const DISCOVERY_PATH = /^\/apis\/discovery\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?(endpointslices)(?:\/([^/]+))?$/;

/** The route of a resource path, or undefined when the real server would answer 404. */
export function parseRoute(path: string, served: ServedGroups): Route | undefined {
  const gateway = served.gatewayApi ? GATEWAY_PATH.exec(path) : null;
  if (gateway) {
    const [, version, namespace, resource, name, status] = gateway;
    const kind = KIND_OF[resource as Resource];
    const info = KINDS[kind];
    if (info.apiVersion !== `${GATEWAY_GROUP}/${version}`) return undefined;
    // Namespaced kinds are read across namespaces or in one; cluster-scoped ones never in one.
    if (info.cluster ? namespace !== undefined : name !== undefined && namespace === undefined) return undefined;
    if (status && (!info.status || name === undefined)) return undefined;
    return {
      kind,
      namespace: info.cluster ? undefined : namespace,
      ...(name !== undefined ? { name: decodeURIComponent(name) } : {}),
      ...(status ? { status: true } : {}),
    };
  }
  const m = CORE_PATH.exec(path) ?? (served.endpointSlices ? DISCOVERY_PATH.exec(path) : null);
  if (!m) return undefined;
  // An object lives in a namespace: /api/v1/services/<name> is not a path of the real server.
  if (m[3] !== undefined && m[1] === undefined) return undefined;
  return {
    kind: KIND_OF[m[2] as Resource],
    namespace: m[1],
    ...(m[3] !== undefined ? { name: decodeURIComponent(m[3]) } : {}),
  };
}

/** The API server's equality-based selectors; set-based ones are refused as unsupported here. */
export function parseSelector(text: string): LabelSelector {
  if (text.includes("("))
    throw badRequest(`unable to parse requirement: set-based selectors are not supported by the emulator: ${text}`);
  try {
    return parseLabelSelector(text);
  } catch (err) {
    throw badRequest(`unable to parse requirement: ${errorMessage(err)}`);
  }
}

export function inScope(route: Route, obj: KubeObject): boolean {
  return route.namespace === undefined || obj.metadata.namespace === route.namespace;
}

export function matches(selector: LabelSelector, obj: KubeObject): boolean {
  return matchesSelector(selector, obj.metadata.labels ?? {});
}
