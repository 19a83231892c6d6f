import { unknownAnnotationWarnings } from "./annotation-keys.js";
import { ANNOTATIONS, parseAnnotations } from "./annotations.js";
import { parseBackendSettings, settingDefaults, settingsFor } from "./backend-settings.js";
import { EndpointIndex, formatAddress, type EndpointSource } from "./endpoints.js";
import { hostText, type HostMatch } from "./host-match.js";
import { hostRefusal, oldestFirst, PathSpaces } from "./ownership.js";
import { parseServiceRef } from "./k8s-names.js";
import { matchesSelector } from "./label-selector.js";
import type { Backend, HttpRoute, Model, Skipped, TcpFrontend, Warning } from "./model.js";
import { compareStrings } from "./compare.js";
import type { RenderOptions } from "./options.js";
import { OptionsError } from "./settings.js";
import { MAX_PORT_ENDPOINTS, MAX_SERVICE_PORTS, MAX_SERVICE_SLOTS } from "./service-caps.js";
import { assignSlots, growsAtRuntime, slotCookies, slotCount } from "./slots.js";
import type { EndpointSlice, Endpoints, Service, Snapshot } from "./snapshot.js";
import { SweptMap } from "./swept-map.js";

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
interface ServicePlan {
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

/**
 * What a warm instance remembers between renders of live snapshots (`Snapshot.trustedRevisions`;
 * a hand-edited file keeps stale versions): the plan of every Service, keyed by the Service's and
 * its endpoint objects' resourceVersions, which the API server changes on every write; and the
 * last model, so a render where only endpoints moved skips the settlement over all Services.
 * One cache serves one set of options.
 */
export class ModelCache {
  /** Plans by namespace and name; a full pass forgets the Services it no longer lists. */
  readonly plans = new SweptMap<CachedPlan>();
  /** Counts full passes (a warm pass over replaced objects only does not start one). */
  get generation(): number {
    return this.plans.generation;
  }
  get size(): number {
    return this.plans.size;
  }
  last: AssembledModel | undefined;
  /** What each plan claims (see `claims`), computed once per plan. */
  readonly claims = new WeakMap<ServicePlan, string>();
  /** The last pass's lists and the endpoint index over them, kept up to date by the objects that change. */
  lists: LastLists | undefined;
}

interface LastLists {
  options: RenderOptions;
  services: readonly Service[];
  endpointSlices: readonly EndpointSlice[];
  endpoints: readonly Endpoints[];
  index: EndpointIndex;
  /** The plan of each Service of `services`, when they were planned in list order (unfiltered, sorted already). */
  plans: ServicePlan[] | null;
}

/** More changed objects than this in one list, and a warm pass looks at every Service again. */
const MOST_CHANGED = 64;

/**
 * Positions where a list holds other objects than the last one did, or null when it is not the
 * same list with a few objects replaced. A live list of a warm instance hands out the very objects
 * of the last list for what did not change (ParsedItems), so this compares references only.
 */
function replacedAt<T>(before: readonly T[], after: readonly T[]): number[] | null {
  if (before.length !== after.length) return null;
  const at: number[] = [];
  for (let i = 0; i < after.length; i++) if (before[i] !== after[i] && at.push(i) > MOST_CHANGED) return null;
  return at;
}

/**
 * The Services a warm pass must plan again, by position in `services`, when the snapshot is the
 * last one with a few objects replaced (the same Services, in the same order); null otherwise.
 * The endpoint index is brought up to date on the way.
 */
function changedServices(lists: LastLists | undefined, snapshot: Snapshot, options: RenderOptions): number[] | null {
  if (!lists || lists.options !== options || lists.plans === null) return null;
  const services = replacedAt(lists.services, snapshot.services);
  const slices = replacedAt(lists.endpointSlices, snapshot.endpointSlices);
  const endpoints = replacedAt(lists.endpoints, snapshot.endpoints);
  if (!services || !slices || !endpoints) return null;
  for (const i of services) {
    const before = lists.services[i]!.metadata;
    const now = snapshot.services[i]!.metadata;
    if (before.namespace !== now.namespace || before.name !== now.name) return null;
  }
  const owners: Array<[string, string]> = [];
  for (const i of slices)
    owners.push(...lists.index.replaceSlice(lists.endpointSlices[i]!, snapshot.endpointSlices[i]!));
  for (const i of endpoints) owners.push(...lists.index.replaceEndpoints(lists.endpoints[i]!, snapshot.endpoints[i]!));
  const at = new Set(services);
  for (const [namespace, name] of owners) {
    const i = positionOf(snapshot.services, namespace, name);
    if (i >= 0) at.add(i);
  }
  return [...at];
}

/** Position of a Service in a list sorted by namespace/name, or -1. */
function positionOf(services: readonly Service[], namespace: string, name: string): number {
  let lo = 0;
  let hi = services.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const m = services[mid]!.metadata;
    const d = compareIds(m.namespace, m.name, namespace, name);
    if (d === 0) return mid;
    if (d < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

interface CachedPlan {
  /** The Service's resourceVersion, then name and resourceVersion of each endpoint object. */
  versions: string[];
  plan: ServicePlan;
}

/** A model with what it was assembled from. */
interface AssembledModel {
  plans: ServicePlan[];
  model: Model;
  /** The snapshot had items that were not understood: they are warnings of the model, so it is settled again. */
  problems: boolean;
  options: RenderOptions;
  inputs: BuildInputs;
  /** Position of each backend in `model.backends`, by name. */
  positions: Map<string, number>;
}

function defaultBody(status: number): string {
  return `<!DOCTYPE html><html><head><title>${status}</title></head><body><h1>${status}</h1><p>No service matches this request.</p></body></html>\n`;
}

/** Host rules first (exact, then wildcards, most specific first), then paths, longest prefix first. */
function routeOrder(a: HttpRoute, b: HttpRoute): number {
  const rank = (r: HttpRoute) => (r.match.kind === "host" ? (r.match.host.wildcard ? 1 : 0) : 2);
  const d = rank(a) - rank(b);
  if (d !== 0) return d;
  const ka = a.match.kind === "host" ? a.match.host.name : a.match.prefix;
  const kb = b.match.kind === "host" ? b.match.host.name : b.match.prefix;
  if (ka.length !== kb.length) return kb.length - ka.length;
  return compareStrings(ka, kb);
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

/** The versions a plan depends on, or null when one is missing: a cache may only trust versions it can see. */
function versionsOf(svc: Service, source: EndpointSource): string[] | null {
  const own = svc.metadata.resourceVersion;
  if (!own) return null;
  if (Array.isArray(source)) {
    const versions = [own];
    for (const { metadata } of source as EndpointSlice[]) {
      if (!metadata.resourceVersion) return null;
      versions.push(metadata.name, metadata.resourceVersion);
    }
    return versions;
  }
  if (!source) return [own];
  // "" stands for the Endpoints object's name: slice names are never empty.
  const rv = (source as Endpoints).metadata.resourceVersion;
  return rv ? [own, "", rv] : null;
}

/** Whether a Service and its endpoint objects still have the versions a plan was made from. Allocates nothing. */
function sameVersions(versions: string[], svc: Service, source: EndpointSource): boolean {
  if (versions[0] !== svc.metadata.resourceVersion) return false;
  if (Array.isArray(source)) {
    const slices = source as EndpointSlice[];
    if (versions.length !== 1 + 2 * slices.length) return false;
    for (let i = 0; i < slices.length; i++) {
      const m = slices[i]!.metadata;
      if (versions[1 + 2 * i] !== m.name || versions[2 + 2 * i] !== m.resourceVersion) return false;
    }
    return true;
  }
  if (source)
    return (
      versions.length === 3 && versions[1] === "" && versions[2] === (source as Endpoints).metadata.resourceVersion
    );
  return versions.length === 1;
}

/** Orders Services as their `namespace/name` strings sort, which is the API server's list order. */
function compareServices(a: Service, b: Service): number {
  return compareIds(a.metadata.namespace, a.metadata.name, b.metadata.namespace, b.metadata.name);
}

function compareIds(na: string, a: string, nb: string, b: string): number {
  if (na === nb) return compareStrings(a, b);
  // Different namespaces: the first difference lies within "namespace/", so the names never matter.
  return compareStrings(`${na}/`, `${nb}/`);
}

/** Snapshot + options → model. Pure: the same inputs always give the same model, with or without a cache. */
export function buildModel(
  snapshot: Snapshot,
  options: RenderOptions,
  inputs: BuildInputs = {},
  cache?: ModelCache,
): Model {
  const warm = cache !== undefined && snapshot.trustedRevisions === true ? cache : undefined;
  const scoped = Boolean(options.namespace || options.targetService);
  // A warm pass after a few objects changed plans only their Services again; the rest of the last
  // pass stands as it was. Taken out while this pass runs: a pass that throws leaves none behind.
  const lists = warm?.lists;
  if (warm) warm.lists = undefined;
  const changed = changedServices(lists, snapshot, options);
  const index = changed ? lists!.index : new EndpointIndex(snapshot);
  const scopeNamespace = options.namespace ?? "default";
  const tcpWanted = new Map<string, Set<number>>();
  for (const t of options.tcpServices) {
    const ref = parseServiceRef(t.ref, scopeNamespace)!;
    const key = `${ref.namespace}/${ref.name}`;
    tcpWanted.set(key, (tcpWanted.get(key) ?? new Set()).add(t.port));
  }
  const target = options.targetService;
  const context: PlanContext = { options, index, tcpWanted };

  let services: Service[] = snapshot.services;
  if (scoped) {
    services = services.filter(({ metadata: { namespace, name } }) => {
      if (options.namespace && namespace !== options.namespace) return false;
      return !target || (target.includes("/") ? target === `${namespace}/${name}` : target === name);
    });
  }
  // The API server lists in namespace/name order already: usually no sort, and no copy. The last
  // pass's order holds for a list whose Services are the same, in the same places.
  if (!changed) {
    for (let i = 1; i < services.length; i++) {
      if (compareServices(services[i - 1]!, services[i]!) > 0) {
        services = [...services].sort(compareServices);
        break;
      }
    }
  }

  /** Plans the Service at position i with the warm cache, and marks it seen by this pass. */
  const planWarm = (w: ModelCache, plans: ServicePlan[], i: number): void => {
    const svc = services[i]!;
    const { namespace, name } = svc.metadata;
    const source = index.sourceOf(svc);
    const entry = w.plans.get(namespace, name);
    if (entry && sameVersions(entry.versions, svc, source)) {
      plans[i] = entry.plan;
      w.plans.touch(namespace, name);
      return;
    }
    const plan = planService(svc, context);
    plans[i] = plan;
    const versions = versionsOf(svc, source);
    if (versions === null) w.plans.delete(namespace, name);
    else w.plans.set(namespace, name, { versions, plan });
  };

  let plans: ServicePlan[];
  if (warm && changed) {
    plans = lists!.plans!.slice();
    for (const i of changed) planWarm(warm, plans, i);
  } else if (warm) {
    plans = new Array(services.length);
    warm.plans.begin();
    for (let i = 0; i < services.length; i++) planWarm(warm, plans, i);
    warm.plans.sweep();
  } else {
    plans = new Array(services.length);
    for (let i = 0; i < services.length; i++) plans[i] = planService(services[i]!, context);
  }

  if (!warm) return assemble(plans, snapshot, options, inputs);
  let model = reassemble(warm, plans, snapshot, options, inputs);
  if (!model) {
    model = assemble(plans, snapshot, options, inputs);
    const positions = new Map<string, number>();
    for (const [i, b] of model.backends.entries()) positions.set(b.name, i);
    warm.last = { plans, model, problems: snapshot.problems.length > 0, options, inputs, positions };
  }
  warm.lists = {
    options,
    services: snapshot.services,
    endpointSlices: snapshot.endpointSlices,
    endpoints: snapshot.endpoints,
    index,
    plans: services === snapshot.services ? plans : null,
  };
  return model;
}

/**
 * What of a plan the settlement between Services reads: its skips, warnings, and for every port
 * the names and routes it claims. Two plans with the same claims settle the same way.
 */
function claims(plan: ServicePlan, memo: WeakMap<ServicePlan, string>): string {
  let c = memo.get(plan);
  if (c === undefined) {
    c = JSON.stringify([
      plan.skipped,
      plan.warnings,
      plan.created,
      plan.ports.map((p) => [
        p.tcp,
        p.backend.name,
        p.backend.servicePort,
        p.action,
        p.backend.settings.sslRedirect,
        p.backend.settings.timeoutClient,
        p.defaultPrefix,
        p.host,
        p.aclMatch,
      ]),
    ]);
    memo.set(plan, c);
  }
  return c;
}

/**
 * The last model with the backends of changed plans swapped in, when every changed plan claims
 * exactly what its predecessor claimed (endpoints moved; the usual change): routes, TCP frontends,
 * warnings and skips are then the same, and so is each backend's place and settled prefix.
 * Null when anything else changed; the caller settles everything again.
 */
function reassemble(
  cache: ModelCache,
  plans: ServicePlan[],
  snapshot: Snapshot,
  options: RenderOptions,
  inputs: BuildInputs,
): Model | null {
  const last = cache.last;
  if (!last || last.options !== options || last.inputs.errorPageBody !== inputs.errorPageBody) return null;
  if (last.plans.length !== plans.length || snapshot.problems.length > 0 || last.problems) return null;
  const changed: Array<[ServicePlan, ServicePlan]> = [];
  for (let i = 0; i < plans.length; i++) {
    const before = last.plans[i]!;
    const now = plans[i]!;
    if (before === now) continue;
    if (before.id !== now.id || claims(before, cache.claims) !== claims(now, cache.claims)) return null;
    changed.push([before, now]);
  }
  if (changed.length === 0 && last.model.revision === snapshot.revision) return last.model;
  const backends = last.model.backends.slice();
  let readyServers = last.model.readyServers;
  for (const [before, now] of changed) {
    now.ports.forEach((p, i) => {
      const at = last.positions.get(p.backend.name);
      const old = before.ports[i]!;
      if (at === undefined || backends[at] !== (old.settled?.backend ?? old.backend)) return;
      readyServers += ready(p.backend) - ready(backends[at]!);
      if (p.tcp) {
        backends[at] = p.backend;
      } else {
        const settledBackend = backends[at]!.strip ? { ...p.backend, strip: backends[at]!.strip } : p.backend;
        p.settled = { stripKey: old.settled!.stripKey, backend: settledBackend };
        backends[at] = settledBackend;
      }
    });
  }
  const model: Model = { ...last.model, revision: snapshot.revision, backends, readyServers };
  last.plans = plans;
  last.model = model;
  return model;
}

/**
 * Settles what Services compete for (routes, TCP ports), oldest claim first (ownership.ts). A
 * Service that loses a host or custom path keeps its own path: it is never dropped because of
 * another Service's claim.
 */
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
  const ordered = oldestFirst(plans);
  const spaces = new PathSpaces();
  for (const plan of ordered) {
    spaces.addService(plan.namespace);
    for (const p of plan.ports)
      if (!p.tcp)
        spaces.addOwnPath(p.defaultPrefix, { service: plan.id, namespace: plan.namespace, backend: p.backend.name });
  }
  /** Host and custom path claims ("host <host>", "path <prefix>") → the Service that holds them. */
  const claimed = new Map<string, string>();

  for (const plan of ordered) {
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
        tcpFrontends.push({
          name: `tcp_${backend.name}`,
          port,
          backend: backend.name,
          timeoutClient: backend.settings.timeoutClient,
        });
        backends.push(backend);
        continue;
      }
      const claimant = { service: plan.id, namespace: plan.namespace, backend: backend.name };
      /** Claims refused: an annotation's, or (no annotation) the port's own path. */
      const lost: Array<{ annotation?: string; owner: string; what: string }> = [];
      const withheld = spaces.ownPathRefusal(p.defaultPrefix);
      let path: string | null = p.defaultPrefix;
      if (withheld) {
        lost.push({ owner: withheld.owner, what: `own path ${p.defaultPrefix} ${withheld.reason}` });
        path = null;
      }
      if (p.aclMatch !== null) {
        const key = `path ${p.aclMatch}`;
        const holder = claimed.get(key);
        const refusal =
          spaces.refusal(p.aclMatch, claimant) ??
          (holder ? { owner: holder, reason: `belongs to ${holder}, whose claim is older` } : null);
        if (refusal) {
          lost.push({
            annotation: ANNOTATIONS.aclMatch,
            owner: refusal.owner,
            what: `path ${p.aclMatch} ${refusal.reason}`,
          });
        } else {
          claimed.set(key, plan.id);
          path = p.aclMatch;
        }
      }
      // A redirecting route carries its status (lb.ssl-redirect-code).
      const redirect =
        p.action === "https-redirect" && backend.settings.sslRedirect !== null
          ? { redirectCode: backend.settings.sslRedirect }
          : {};
      if (path !== null)
        routes.push({ backend: backend.name, match: { kind: "path", prefix: path }, action: p.action, ...redirect });
      let hostRouted: HostMatch | null = null;
      if (p.host) {
        const key = `host ${hostText(p.host)}`;
        const holder = claimed.get(key);
        if (holder) {
          lost.push({
            annotation: ANNOTATIONS.host,
            owner: holder,
            what: `host ${hostText(p.host)} belongs to ${holder}, whose claim is older`,
          });
        } else {
          claimed.set(key, plan.id);
          hostRouted = p.host;
          routes.push({ backend: backend.name, match: { kind: "host", host: p.host }, action: p.action, ...redirect });
        }
      }
      const kept =
        path !== null
          ? `the Service keeps ${path}`
          : hostRouted
            ? `the Service keeps host ${hostText(hostRouted)}`
            : "the port has no route left and is skipped";
      for (const l of lost) {
        warnings.push({
          service: plan.id,
          port,
          ...(l.annotation ? { annotation: l.annotation } : {}),
          owner: l.owner,
          message: `${l.what} (oldest claim wins: creationTimestamp, then namespace/name); ${l.annotation ? "ignored" : "not routed there"}, ${kept}`,
        });
      }
      if (path === null && !hostRouted) {
        skipped.push({
          service: plan.id,
          port,
          reason: `its own path ${p.defaultPrefix} is held by ${withheld!.owner}, and it has no other route`,
        });
        continue;
      }
      const strip = path === p.defaultPrefix ? { prefix: path, unlessHost: hostRouted } : null;
      const stripKey = strip ? `${strip.prefix} ${strip.unlessHost ? hostText(strip.unlessHost) : ""}` : "";
      // The same settled backend object while nothing changed: the renderer caches its text by identity.
      if (p.settled?.stripKey !== stripKey) p.settled = { stripKey, backend: strip ? { ...backend, strip } : backend };
      backends.push(p.settled.backend);
    }
  }

  const body = inputs.errorPageBody ?? defaultBody(options.defaultReturnCode);
  const bytes = Buffer.byteLength(body, "utf8");
  if (bytes > MAX_ERROR_PAGE_BYTES) {
    throw new OptionsError(
      `--error-page: the page is ${bytes} bytes; at most ${MAX_ERROR_PAGE_BYTES} fit in HAProxy's response buffer`,
    );
  }

  routes.sort(routeOrder);
  backends.sort((a, b) => compareStrings(a.name, b.name));
  let readyServers = 0;
  for (const b of backends) readyServers += ready(b);
  tcpFrontends.sort((a, b) => a.port - b.port);
  return {
    revision: snapshot.revision,
    options,
    httpRoutes: routes,
    httpsRoutes: routes
      .filter((r) => r.action !== "route")
      .map((r) => ({ backend: r.backend, match: r.match, action: "route" as const })),
    tcpFrontends,
    backends,
    defaultPage: { status: options.defaultReturnCode, body },
    warnings,
    skipped,
    readyServers,
  };
}

function ready(b: Backend): number {
  let n = 0;
  for (const address of b.servers) if (address !== null) n++;
  return n;
}
