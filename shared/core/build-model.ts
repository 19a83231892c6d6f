import { parseAnnotations, type HostMatch } from "./annotations.js";
import { EndpointIndex, formatAddress } from "./endpoints.js";
import { parseServiceRef } from "./k8s-names.js";
import { matchesSelector } from "./label-selector.js";
import type { Backend, HttpRoute, Model, RouteMatch, Skipped, TcpFrontend, Warning } from "./model.js";
import { OptionsError, type RenderOptions } from "./options.js";
import { assignSlots } from "./slots.js";
import type { Service, Snapshot } from "./snapshot.js";

/** HAProxy answers from one buffer; a page larger than this would be cut (measured on 2.6). */
export const MAX_ERROR_PAGE_BYTES = 8192;
const DEFAULT_AFFINITY_TIMEOUT = 10800;

export interface BuildInputs {
  /** Body of --error-page, read by the caller. */
  errorPageBody?: string;
}

/** One Service port as the Service alone decides it; conflicts with other Services come later. */
interface PortPlan {
  /** The backend before routes are settled: `strip` is null here. */
  backend: Backend;
  tcp: boolean;
  /** HTTP: the routes it asks for, in the order they are claimed (host first). */
  routes: HttpRoute[];
  /** HTTP: the prefix stripped when this port owns its path route (null: aclMatch keeps the path). */
  stripPrefix: string | null;
  host: HostMatch | null;
  /** The backend with its settled `strip`, kept while the settlement stays the same. */
  settled?: { strip: string; backend: Backend };
}

/** Everything one Service contributes, computed from that Service and its endpoints only. */
interface ServicePlan {
  id: string;
  skipped: Skipped[];
  warnings: Warning[];
  ports: PortPlan[];
}

/**
 * Plans of unchanged Services, for a warm instance: keyed by the Service's and its endpoint
 * objects' resourceVersions, which the API server changes on every write. Only snapshots from a
 * live list may use it (`Snapshot.trustedRevisions`): a hand-edited file keeps stale versions.
 * One cache serves one set of options.
 */
export class ModelCache {
  readonly plans = new Map<string, { key: string; plan: ServicePlan }>();
}

function defaultBody(status: number): string {
  return `<!DOCTYPE html><html><head><title>${status}</title></head><body><h1>${status}</h1><p>No service matches this request.</p></body></html>\n`;
}

function hostKey(h: HostMatch): string {
  return h.wildcard ? `*.${h.name}` : h.name;
}

function matchKey(m: RouteMatch): string {
  return m.kind === "host" ? `host ${hostKey(m.host)}` : `path ${m.prefix}`;
}

/** Host rules first (exact, then wildcards, most specific first), then paths, longest prefix first. */
function routeOrder(a: HttpRoute, b: HttpRoute): number {
  const rank = (r: HttpRoute) => (r.match.kind === "host" ? (r.match.host.wildcard ? 1 : 0) : 2);
  const d = rank(a) - rank(b);
  if (d !== 0) return d;
  const ka = a.match.kind === "host" ? a.match.host.name : a.match.prefix;
  const kb = b.match.kind === "host" ? b.match.host.name : b.match.prefix;
  if (ka.length !== kb.length) return kb.length - ka.length;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

interface PlanContext {
  options: RenderOptions;
  index: EndpointIndex;
  tcpWanted: Map<string, Set<number>>;
}

function planService(svc: Service, c: PlanContext): ServicePlan {
  const { options } = c;
  const { namespace, name } = svc.metadata;
  const id = `${namespace}/${name}`;
  const plan: ServicePlan = { id, skipped: [], warnings: [], ports: [] };
  const skip = (reason: string, port?: number) => plan.skipped.push(port === undefined ? { service: id, reason } : { service: id, port, reason });
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
  for (const w of annWarnings) plan.warnings.push({ service: id, annotation: w.annotation, message: w.message });
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
      if (flag !== undefined) plan.warnings.push({ service: id, annotation: `serviceloadbalancer/lb.${key}`, message: "ignored: the Service has no HTTP ports" });
    }
  }

  for (const sp of ports) {
    if (sp.protocol !== "TCP") {
      skip(`${sp.protocol} port: HAProxy balances TCP only`, sp.port);
      continue;
    }
    const isTcp = tcpPorts?.has(sp.port) ?? false;
    if (!isTcp && ann.sslTerm && !options.sslCert) {
      skip("lb.sslTerm is set but no --ssl-cert is configured: not served in clear text", sp.port);
      continue;
    }
    let addresses: string[];
    if (options.forwardServices) {
      const address = headless ? null : formatAddress(svc.spec.clusterIP!, sp.port);
      if (!address) {
        skip("headless Service: --forward-services needs a ClusterIP", sp.port);
        continue;
      }
      addresses = [address];
    } else {
      addresses = c.index.addresses(svc, sp);
    }
    if (addresses.length === 0) {
      skip("no ready endpoints", sp.port);
      continue;
    }
    const backendName = `${namespace}_${name}_${sp.port}`;
    const cookie = !isTcp && ann.cookieSticky;
    const affinity: Backend["affinity"] = cookie
      ? { kind: "cookie" }
      : svc.spec.sessionAffinity === "ClientIP"
        ? { kind: "source", timeoutSeconds: svc.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT }
        : { kind: "none" };
    const backend: Backend = {
      name: backendName,
      namespace,
      service: name,
      servicePort: sp.port,
      mode: isTcp ? "tcp" : "http",
      algorithm: ann.algorithm ?? options.balanceAlgorithm,
      affinity,
      servers: assignSlots(addresses, options.forwardServices ? 1 : options.minServerSlots, affinity.kind === "cookie"),
      strip: null,
    };
    if (isTcp) {
      plan.ports.push({ backend, tcp: true, routes: [], stripPrefix: null, host: null });
      continue;
    }
    const action: HttpRoute["action"] = ann.sslTerm ? "https-redirect" : "route";
    const isPrimary = sp === primary;
    const defaultPrefix = `${namespace === "default" ? "" : `/${namespace}`}/${name}${sp.port === 80 ? "" : `:${sp.port}`}`;
    const custom = isPrimary && ann.aclMatch !== undefined;
    const prefix = custom ? ann.aclMatch! : defaultPrefix;
    const host = isPrimary && ann.host ? ann.host : null;
    const wanted: RouteMatch[] = host ? [{ kind: "host", host }, { kind: "path", prefix }] : [{ kind: "path", prefix }];
    plan.ports.push({ backend, tcp: false, routes: wanted.map((match) => ({ backend: backendName, match, action })), stripPrefix: custom ? null : prefix, host });
  }
  return plan;
}

/** The cache key of one Service: its resourceVersion and those of the objects that hold its endpoints. */
function revisionKey(svc: Service, index: EndpointIndex): string | null {
  const own = svc.metadata.resourceVersion;
  const endpoints = index.revisions(svc);
  return own && endpoints !== null ? `${own}|${endpoints}` : null;
}

/** Snapshot + options → model. Pure: the same inputs always give the same model, with or without a cache. */
export function buildModel(snapshot: Snapshot, options: RenderOptions, inputs: BuildInputs = {}, cache?: ModelCache): Model {
  const index = new EndpointIndex(snapshot);
  const scopeNamespace = options.namespace ?? "default";
  const tcpWanted = new Map<string, Set<number>>();
  for (const t of options.tcpServices) {
    const ref = parseServiceRef(t.ref, scopeNamespace)!;
    const key = `${ref.namespace}/${ref.name}`;
    tcpWanted.set(key, (tcpWanted.get(key) ?? new Set()).add(t.port));
  }
  const target = options.targetService;
  const context: PlanContext = { options, index, tcpWanted };
  const useCache = cache !== undefined && snapshot.trustedRevisions === true;

  const services: Array<{ id: string; svc: Service }> = [];
  for (const svc of snapshot.services) {
    const { namespace, name } = svc.metadata;
    const id = `${namespace}/${name}`;
    if (options.namespace && namespace !== options.namespace) continue;
    if (target && !(target.includes("/") ? target === id : target === name)) continue;
    services.push({ id, svc });
  }
  services.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  const plans: ServicePlan[] = [];
  const seen = new Set<string>();
  for (const { id, svc } of services) {
    const key = useCache ? revisionKey(svc, index) : null;
    const hit = key !== null ? cache!.plans.get(id) : undefined;
    if (hit && hit.key === key) {
      plans.push(hit.plan);
    } else {
      const plan = planService(svc, context);
      if (key !== null) cache!.plans.set(id, { key, plan });
      plans.push(plan);
    }
    seen.add(id);
  }
  if (useCache) for (const id of cache!.plans.keys()) if (!seen.has(id)) cache!.plans.delete(id);

  return assemble(plans, snapshot, options, inputs);
}

/** Settles what Services compete for (routes, TCP ports) in namespace/name order: the first one wins. */
function assemble(plans: ServicePlan[], snapshot: Snapshot, options: RenderOptions, inputs: BuildInputs): Model {
  const warnings: Warning[] = snapshot.problems.map((p) => ({ service: "-", message: `snapshot item ignored: ${p}` }));
  const skipped: Skipped[] = [];
  const backends: Backend[] = [];
  const routes: HttpRoute[] = [];
  const tcpFrontends: TcpFrontend[] = [];
  const reservedPorts = new Map<number, string>([
    [options.httpPort, "--http-port"],
    [options.statsPort, "--stats-port"],
  ]);
  if (options.sslCert) reservedPorts.set(options.httpsPort, "--https-port");
  const claimedRoutes = new Map<string, string>();

  for (const plan of plans) {
    for (const s of plan.skipped) skipped.push(s);
    for (const w of plan.warnings) warnings.push(w);
    for (const p of plan.ports) {
      const { backend } = p;
      const port = backend.servicePort;
      if (p.tcp) {
        const holder = reservedPorts.get(port);
        if (holder) {
          warnings.push({ service: plan.id, port, message: `TCP port ${port} is already used by ${holder}; skipped` });
          skipped.push({ service: plan.id, port, reason: `TCP port ${port} taken by ${holder}` });
          continue;
        }
        reservedPorts.set(port, `TCP service ${plan.id}`);
        tcpFrontends.push({ name: `tcp_${backend.name}`, port, backend: backend.name });
        backends.push(backend);
        continue;
      }
      let routed = 0;
      for (const route of p.routes) {
        const key = matchKey(route.match);
        const owner = claimedRoutes.get(key);
        if (owner) {
          warnings.push({ service: plan.id, port, message: `${key} is already routed to ${owner}; this route is skipped` });
          continue;
        }
        claimedRoutes.set(key, backend.name);
        routed++;
        routes.push(route);
      }
      if (routed === 0) {
        skipped.push({ service: plan.id, port, reason: "every route it asks for is taken by another Service" });
        continue;
      }
      const hostRouted = p.host && claimedRoutes.get(`host ${hostKey(p.host)}`) === backend.name ? p.host : null;
      const ownsPath = p.stripPrefix !== null && claimedRoutes.get(`path ${p.stripPrefix}`) === backend.name;
      const strip = ownsPath ? { prefix: p.stripPrefix!, unlessHost: hostRouted } : null;
      const stripKey = strip ? `${strip.prefix} ${strip.unlessHost ? hostKey(strip.unlessHost) : ""}` : "";
      // The same settled backend object while nothing changed: the renderer caches its text by identity.
      if (p.settled?.strip !== stripKey) p.settled = { strip: stripKey, backend: strip ? { ...backend, strip } : backend };
      backends.push(p.settled.backend);
    }
  }

  const body = inputs.errorPageBody ?? defaultBody(options.defaultReturnCode);
  const bytes = Buffer.byteLength(body, "utf8");
  if (bytes > MAX_ERROR_PAGE_BYTES) {
    throw new OptionsError(`--error-page: the page is ${bytes} bytes; at most ${MAX_ERROR_PAGE_BYTES} fit in HAProxy's response buffer`);
  }

  routes.sort(routeOrder);
  backends.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  tcpFrontends.sort((a, b) => a.port - b.port);
  return {
    revision: snapshot.revision,
    options,
    httpRoutes: routes,
    httpsRoutes: routes.filter((r) => r.action === "https-redirect").map((r) => ({ ...r, action: "route" as const })),
    tcpFrontends,
    backends,
    defaultPage: { status: options.defaultReturnCode, body },
    warnings,
    skipped,
  };
}
