/*
 * The rules for one Service: what it contributes to the model (backends, the routes and TCP ports
 * it claims, its warnings and skips), computed from that Service and its endpoints alone. Claims
 * that compete with other Services are settled later (build-model.ts `assemble`).
 */

import { unknownAnnotationWarnings } from "./annotation-keys.js";
import { ANNOTATIONS, parseAnnotations } from "./annotations.js";
import { parseBackendSettings, settingDefaults, settingsFor } from "./backend-settings.js";
import { type EndpointIndex, formatAddress } from "../kubernetes/endpoints.js";
import type { HostMatch } from "./host-match.js";
import { hostRefusal } from "../kubernetes/ownership.js";
import { matchesSelector } from "../kubernetes/label-selector.js";
import type { Backend, HttpRoute, Skipped, Warning } from "./model.js";
import { compareStrings } from "../compare.js";
import type { RenderOptions } from "../settings/options.js";
import { MAX_PORT_ENDPOINTS, MAX_SERVICE_PORTS, MAX_SERVICE_SLOTS } from "./service-caps.js";
import { assignSlots, growsAtRuntime, slotCookies, slotCount } from "./slots.js";
import type { Service } from "../kubernetes/snapshot-schemas.js";

const DEFAULT_AFFINITY_TIMEOUT = 10800;

/** One Service port as the Service alone decides it; conflicts with other Services come later. */
export interface PortPlan {
  /** The backend before routes are settled: `strip` is null here. */
  backend: Backend;
  tcp: boolean;
  /** HTTP: how its routes act (plain HTTP requests to a TLS-terminating Service are redirected). */
  action: HttpRoute["action"];
  /** HTTP: its own path, `/<name>[:<port>]` or `/<namespace>/<name>[:<port>]`, which no one else may claim. */
  defaultPrefix: string;
  /** HTTP: the host it claims (lb.host), which other Services may claim too. */
  host: HostMatch | null;
  /** HTTP: the path it claims instead of its own (lb.aclMatch); its own stays its fallback. */
  aclMatch: string | null;
  /** The backend with its settled `strip`, kept while the settlement stays the same. */
  settled?: { stripKey: string; backend: Backend };
}

/** Everything one Service contributes, computed from that Service and its endpoints only. */
export interface ServicePlan {
  id: string;
  namespace: string;
  /**
   * metadata.creationTimestamp in ms (Infinity when the object has none, as only hand-made ones
   * lack it): contested claims go to the oldest Service.
   */
  created: number;
  skipped: Skipped[];
  warnings: Warning[];
  ports: PortPlan[];
}

export interface PlanContext {
  options: RenderOptions;
  index: EndpointIndex;
  tcpWanted: Map<string, Set<number>>;
}

export function planService(svc: Service, c: PlanContext): ServicePlan {
  const { options } = c;
  const { namespace, name } = svc.metadata;
  const id = `${namespace}/${name}`;
  const timestamp = svc.metadata.creationTimestamp;
  const created = timestamp ? Date.parse(timestamp) : Infinity;
  const plan: ServicePlan = { id, namespace, created, skipped: [], warnings: [], ports: [] };
  const skip = (reason: string, port?: number) =>
    plan.skipped.push(port === undefined ? { service: id, reason } : { service: id, port, reason });
  if (options.selector && !matchesSelector(options.selector, svc.metadata.labels)) {
    skip("labels do not match --selector");
    return plan;
  }
  if (!options.exposeSystem && (namespace === "kube-system" || id === "default/kubernetes")) {
    skip("system Service (use --expose-system to expose it)");
    return plan;
  }
  if (svc.spec.type === "LoadBalancer") {
    skip("type LoadBalancer: it has a load balancer already");
    return plan;
  }
  if (svc.spec.type === "ExternalName") {
    skip("type ExternalName: no endpoints to balance");
    return plan;
  }
  const { values: ann, warnings: annWarnings } = parseAnnotations(svc.metadata.annotations);
  for (const w of [...annWarnings, ...unknownAnnotationWarnings(svc.metadata.annotations)])
    plan.warnings.push({ service: id, annotation: w.annotation, message: w.message });
  const hostRefused = ann.host ? hostRefusal(ann.host, namespace, options) : null;
  if (hostRefused) {
    plan.warnings.push({
      service: id,
      annotation: ANNOTATIONS.host,
      owner: hostRefused.owner,
      message: `${hostRefused.reason}; ignored`,
    });
    delete ann.host;
  }
  const parsedSettings = parseBackendSettings(svc.metadata.annotations, ann.sslTerm, settingDefaults(options));
  for (const w of parsedSettings.warnings)
    plan.warnings.push({ service: id, annotation: w.annotation, message: w.message });
  const headless = !svc.spec.clusterIP || svc.spec.clusterIP === "None";
  const tcpPorts = c.tcpWanted.get(id);
  const ports = [...svc.spec.ports].sort((a, b) => a.port - b.port);
  const httpPorts = ports.filter((p) => p.protocol === "TCP" && !tcpPorts?.has(p.port));
  // Host and custom path belong to one port: 80 when the Service has it, else its lowest HTTP port.
  const primary = httpPorts.find((p) => p.port === 80) ?? httpPorts[0];
  if (httpPorts.length === 0) {
    for (const [flag, key] of [
      [ann.host, "host"],
      [ann.aclMatch, "aclMatch"],
      [ann.sslTerm || undefined, "sslTerm"],
      [ann.cookieSticky || undefined, "cookie-sticky-session"],
    ] as const) {
      if (flag !== undefined)
        plan.warnings.push({
          service: id,
          annotation: `serviceloadbalancer/lb.${key}`,
          message: "ignored: the Service has no HTTP ports",
        });
    }
  }

  // Skipped port by port below; said once as a warning too, since the Service silently answers 404.
  if (ann.sslTerm && !options.sslCert && httpPorts.length > 0)
    plan.warnings.push({
      service: id,
      annotation: "serviceloadbalancer/lb.sslTerm",
      message: "not served: no --ssl-cert is configured, and a TLS Service is never served in clear text",
    });
  // Caps per Service (service-caps.ts): the ports over them, in port order, and the slots taken so far.
  const overPorts: number[] = [];
  const overSlots: number[] = [];
  let slots = 0;
  const minSlots = options.forwardServices ? 1 : options.minServerSlots;
  // Room is kept for the port that carries the host and custom path, wherever its number falls.
  let held = primary && {
    ports: 1,
    slots: slotCount(
      options.forwardServices ? 1 : Math.min(c.index.addresses(svc, primary).length, MAX_PORT_ENDPOINTS),
      minSlots,
      !options.forwardServices,
    ),
  };
  for (const sp of ports) {
    if (sp === primary) held = undefined;
    if (sp.protocol !== "TCP") {
      skip(`${sp.protocol} port: HAProxy balances TCP only`, sp.port);
      continue;
    }
    const isTcp = tcpPorts?.has(sp.port) ?? false;
    if (!isTcp && ann.sslTerm && !options.sslCert) {
      skip("lb.sslTerm is set but no --ssl-cert is configured: not served in clear text", sp.port);
      continue;
    }
    const forwarded = !options.forwardServices
      ? undefined
      : headless
        ? null
        : formatAddress(svc.spec.clusterIP!, sp.port);
    if (forwarded === null) {
      skip("headless Service: --forward-services needs a ClusterIP", sp.port);
      continue;
    }
    // Before its endpoints are looked up: a Service of thousands of ports costs no more than 64.
    if (plan.ports.length + (held?.ports ?? 0) >= MAX_SERVICE_PORTS) {
      overPorts.push(sp.port);
      skip(`over the cap of ${MAX_SERVICE_PORTS} ports per Service`, sp.port);
      continue;
    }
    let addresses = forwarded !== undefined ? [forwarded] : c.index.addresses(svc, sp);
    if (addresses.length > MAX_PORT_ENDPOINTS) {
      plan.warnings.push({
        service: id,
        port: sp.port,
        message: `${addresses.length} ready endpoints: the first ${MAX_PORT_ENDPOINTS} by address are served, the cap per port`,
      });
      addresses = addresses.slice(0, MAX_PORT_ENDPOINTS);
    }
    const { settings, ignored } = settingsFor(parsedSettings, isTcp ? "tcp" : "http");
    const cookie = !isTcp && ann.cookieSticky;
    const algorithm = ann.algorithm ?? options.balanceAlgorithm;
    const affinity: Backend["affinity"] = cookie
      ? { kind: "cookie" }
      : svc.spec.sessionAffinity === "ClientIP"
        ? {
            kind: "source",
            timeoutSeconds: svc.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT,
          }
        : { kind: "none" };
    const grows = growsAtRuntime(algorithm, affinity.kind, settings.check);
    const servers = assignSlots(addresses, slotCount(addresses.length, minSlots, !options.forwardServices, grows));
    if (plan.ports.length > 0 && slots + servers.length + (held?.slots ?? 0) > MAX_SERVICE_SLOTS) {
      overSlots.push(sp.port);
      skip(`over the cap of ${MAX_SERVICE_SLOTS} server slots per Service`, sp.port);
      continue;
    }
    slots += servers.length;
    // No ready endpoint keeps the backend, every slot free: the route answers 503 (the Service
    // exists, nothing serves it) and scaling back up is a runtime change, not a reload.
    const backendName = `${namespace}_${name}_${sp.port}`;
    for (const w of ignored)
      plan.warnings.push({ service: id, port: sp.port, annotation: w.annotation, message: w.message });
    const backend: Backend = {
      name: backendName,
      namespace,
      service: name,
      servicePort: sp.port,
      mode: isTcp ? "tcp" : "http",
      algorithm,
      affinity,
      servers,
      cookies: affinity.kind === "cookie" ? slotCookies(servers) : null,
      strip: null,
      settings,
    };
    const isPrimary = sp === primary;
    plan.ports.push({
      backend,
      tcp: isTcp,
      action: !ann.sslTerm ? "route" : settings.sslRedirect === null ? "route-and-https" : "https-redirect",
      defaultPrefix: isTcp
        ? ""
        : `${namespace === "default" ? "" : `/${namespace}`}/${name}${sp.port === 80 ? "" : `:${sp.port}`}`,
      host: !isTcp && isPrimary ? (ann.host ?? null) : null,
      aclMatch: !isTcp && isPrimary ? (ann.aclMatch ?? null) : null,
    });
  }
  if (overPorts.length > 0)
    plan.warnings.push({
      service: id,
      message: `${portCount(overPorts)} not served (${portList(overPorts)}): over the cap of ${MAX_SERVICE_PORTS} ports per Service, which serves its lowest ports${primary ? ` and port ${primary.port}` : ""}`,
    });
  if (overSlots.length > 0)
    plan.warnings.push({
      service: id,
      message: `${portCount(overSlots)} not served (${portList(overSlots)}): their server slots would take the Service over the cap of ${MAX_SERVICE_SLOTS} per Service`,
    });
  return plan;
}

const portCount = (ports: readonly number[]) => (ports.length === 1 ? "1 port" : `${ports.length} ports`);

/** "8080, 8081, 8082 … 9999" */
function portList(ports: readonly number[]): string {
  return ports.length <= 4 ? ports.join(", ") : `${ports.slice(0, 3).join(", ")} … ${ports.at(-1)}`;
}

/** How many of a backend's slots hold an address. */
export function readyCount(b: Backend): number {
  let n = 0;
  for (const address of b.servers) if (address !== null) n++;
  return n;
}

/** Orders Services as their `namespace/name` strings sort, which is the API server's list order. */
export function compareServices(a: Service, b: Service): number {
  return compareIds(a.metadata.namespace, a.metadata.name, b.metadata.namespace, b.metadata.name);
}

/** The order of `na/a` and `nb/b` without building either string. */
export function compareIds(na: string, a: string, nb: string, b: string): number {
  if (na === nb) return compareStrings(a, b);
  // Different namespaces: the first difference lies within "namespace/", so the names never matter.
  return compareStrings(`${na}/`, `${nb}/`);
}
