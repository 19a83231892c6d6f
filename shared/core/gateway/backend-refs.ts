/*
 * An HTTPRoute's backendRefs, resolved: a Service port of the cluster (Service kind only), in the
 * route's namespace or in another one that grants it with a ReferenceGrant
 * (apis/v1beta1/referencegrant_types.go). A reference that does not resolve keeps its share of
 * the traffic, answered 500, and gives the route's ResolvedRefs condition its reason.
 */

import { EndpointIndex } from "../kubernetes/endpoints.js";
import { MAX_PORT_ENDPOINTS } from "../model/service-caps.js";
import type { Service, Snapshot } from "../kubernetes/snapshot.js";
import { GATEWAY_GROUP, type HTTPBackendRef, type HTTPRoute, type ReferenceGrant } from "./schemas.js";
import type { GatewayBackend } from "./routing.js";

export type RefProblem = { reason: "InvalidKind" | "RefNotPermitted" | "BackendNotFound"; message: string };

/** HAProxy proxy names allow `:`, Kubernetes names never hold one: these cannot meet a Service's backend. */
export function gatewayBackendName(namespace: string, service: string, port: number): string {
  return `gw:${namespace}:${service}:${port}`;
}

/** Whether a ReferenceGrant in the Service's namespace lets HTTPRoutes of `fromNamespace` refer to it. */
export function referenceGranted(
  grants: readonly ReferenceGrant[],
  fromNamespace: string,
  toNamespace: string,
  service: string,
): boolean {
  return grants.some(
    (g) =>
      g.metadata.namespace === toNamespace &&
      g.spec.from.some((f) => f.group === GATEWAY_GROUP && f.kind === "HTTPRoute" && f.namespace === fromNamespace) &&
      g.spec.to.some((t) => t.group === "" && t.kind === "Service" && (t.name === null || t.name === service)),
  );
}

/** Resolves backendRefs against one snapshot; backends are made once per Service port. */
export class BackendResolver {
  private readonly services = new Map<string, Service>();
  private readonly index: EndpointIndex;
  readonly backends = new Map<string, GatewayBackend>();

  /** `inScope`: the Services routes may reach, those servicelb exposes (--namespace, --selector). */
  constructor(
    snapshot: Pick<Snapshot, "services" | "endpointSlices" | "endpoints">,
    private readonly grants: readonly ReferenceGrant[],
    inScope: (service: Service) => boolean = () => true,
  ) {
    for (const s of snapshot.services)
      if (inScope(s)) this.services.set(`${s.metadata.namespace}/${s.metadata.name}`, s);
    this.index = new EndpointIndex(snapshot);
  }

  /** The backend's name, or why the reference does not resolve. */
  resolve(route: HTTPRoute, ref: HTTPBackendRef): { backend: string } | RefProblem {
    const where = `backendRef ${ref.name}`;
    if (ref.group !== "" || ref.kind !== "Service")
      return {
        reason: "InvalidKind",
        message: `${where}: kind ${ref.group ? `${ref.kind}.${ref.group}` : ref.kind} is not supported (Service only)`,
      };
    const routeNamespace = route.metadata.namespace;
    const namespace = ref.namespace ?? routeNamespace;
    if (namespace !== routeNamespace && !referenceGranted(this.grants, routeNamespace, namespace, ref.name))
      return {
        reason: "RefNotPermitted",
        message: `${where}: no ReferenceGrant in namespace ${namespace} lets HTTPRoutes of ${routeNamespace} refer to Service ${ref.name}`,
      };
    const service = this.services.get(`${namespace}/${ref.name}`);
    if (!service) return { reason: "BackendNotFound", message: `${where}: Service ${namespace}/${ref.name} not found` };
    if (ref.port === null) return { reason: "BackendNotFound", message: `${where}: a Service reference needs a port` };
    const port = service.spec.ports.find((p) => p.port === ref.port && p.protocol === "TCP");
    if (!port)
      return {
        reason: "BackendNotFound",
        message: `${where}: Service ${namespace}/${ref.name} has no TCP port ${ref.port}`,
      };
    const name = gatewayBackendName(namespace, ref.name, ref.port);
    if (!this.backends.has(name))
      this.backends.set(name, {
        name,
        namespace,
        service: ref.name,
        port: ref.port,
        servers: this.index.addresses(service, port).slice(0, MAX_PORT_ENDPOINTS),
      });
    return { backend: name };
  }
}

/** The ResolvedRefs message for a route's unresolved references (the first few, and how many more). */
export function backendShareProblems(problems: readonly RefProblem[]): string {
  const shown = problems.slice(0, 3).map((p) => p.message);
  const more = problems.length - shown.length;
  return `${shown.join("; ")}${more > 0 ? `; and ${more} more` : ""} (their share of the traffic is answered 500)`;
}
