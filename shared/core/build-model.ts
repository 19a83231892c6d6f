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

/** Snapshot + options → model. Pure: the same inputs always give the same model. */
export function buildModel(snapshot: Snapshot, options: RenderOptions, inputs: BuildInputs = {}): Model {
  const warnings: Warning[] = [];
  const skipped: Skipped[] = [];
  const backends: Backend[] = [];
  const routes: HttpRoute[] = [];
  const tcpFrontends: TcpFrontend[] = [];
  const index = new EndpointIndex(snapshot);
  const scopeNamespace = options.namespace ?? "default";
  const tcpWanted = new Map<string, Set<number>>();
  for (const t of options.tcpServices) {
    const ref = parseServiceRef(t.ref, scopeNamespace)!;
    const key = `${ref.namespace}/${ref.name}`;
    tcpWanted.set(key, (tcpWanted.get(key) ?? new Set()).add(t.port));
  }
  const target = options.targetService ? options.targetService : undefined;
  const reservedPorts = new Map<number, string>([
    [options.httpPort, "--http-port"],
    [options.statsPort, "--stats-port"],
  ]);
  if (options.sslCert) reservedPorts.set(options.httpsPort, "--https-port");
  const claimedRoutes = new Map<string, string>();

  for (const p of snapshot.problems) warnings.push({ service: "-", message: `snapshot item ignored: ${p}` });

  const services = [...snapshot.services].sort((a, b) => {
    const ka = `${a.metadata.namespace}/${a.metadata.name}`;
    const kb = `${b.metadata.namespace}/${b.metadata.name}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });

  for (const svc of services) {
    const { namespace, name } = svc.metadata;
    const id = `${namespace}/${name}`;
    const skip = (reason: string, port?: number) => skipped.push(port === undefined ? { service: id, reason } : { service: id, port, reason });
    if (options.namespace && namespace !== options.namespace) continue;
    if (target && !(target.includes("/") ? target === id : target === name)) continue;
    if (options.selector && !matchesSelector(options.selector, svc.metadata.labels)) {
      skip("labels do not match --selector");
      continue;
    }
    if (!options.exposeSystem && (namespace === "kube-system" || id === "default/kubernetes")) {
      skip("system Service (use --expose-system to expose it)");
      continue;
    }
    if (svc.spec.type === "LoadBalancer") {
      skip("type LoadBalancer: it has a load balancer already");
      continue;
    }
    if (svc.spec.type === "ExternalName") {
      skip("type ExternalName: no endpoints to balance");
      continue;
    }
    const { values: ann, warnings: annWarnings } = parseAnnotations(svc.metadata.annotations);
    for (const w of annWarnings) warnings.push({ service: id, annotation: w.annotation, message: w.message });
    const headless = !svc.spec.clusterIP || svc.spec.clusterIP === "None";
    const tcpPorts = tcpWanted.get(id);
    const ports = [...svc.spec.ports].sort((a, b) => a.port - b.port);
    const httpPorts = ports.filter((p) => p.protocol === "TCP" && !tcpPorts?.has(p.port));
    // Host and custom path belong to one port: 80 when the Service has it, else its lowest HTTP port.
    const primary = httpPorts.find((p) => p.port === 80) ?? httpPorts[0];
    const isTcpOnly = httpPorts.length === 0;
    if (isTcpOnly) {
      for (const [flag, key] of [
        [ann.host, "host"],
        [ann.aclMatch, "aclMatch"],
        [ann.sslTerm || undefined, "sslTerm"],
        [ann.cookieSticky || undefined, "cookie-sticky-session"],
      ] as const) {
        if (flag !== undefined) warnings.push({ service: id, annotation: `serviceloadbalancer/lb.${key}`, message: "ignored: the Service has no HTTP ports" });
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
        addresses = index.addresses(svc, sp);
      }
      if (addresses.length === 0) {
        skip("no ready endpoints", sp.port);
        continue;
      }
      const backendName = `${namespace}_${name}_${sp.port}`;
      const sourceAffinity = svc.spec.sessionAffinity === "ClientIP";
      const cookie = !isTcp && ann.cookieSticky;
      const affinity: Backend["affinity"] = cookie
        ? { kind: "cookie" }
        : sourceAffinity
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
        const holder = reservedPorts.get(sp.port);
        if (holder) {
          warnings.push({ service: id, port: sp.port, message: `TCP port ${sp.port} is already used by ${holder}; skipped` });
          skip(`TCP port ${sp.port} taken by ${holder}`, sp.port);
          continue;
        }
        reservedPorts.set(sp.port, `TCP service ${id}`);
        tcpFrontends.push({ name: `tcp_${backendName}`, port: sp.port, backend: backendName });
        backends.push(backend);
        continue;
      }

      const action: HttpRoute["action"] = ann.sslTerm ? "https-redirect" : "route";
      const wanted: RouteMatch[] = [];
      const isPrimary = sp === primary;
      const defaultPrefix = `${namespace === "default" ? "" : `/${namespace}`}/${name}${sp.port === 80 ? "" : `:${sp.port}`}`;
      const prefix = isPrimary && ann.aclMatch !== undefined ? ann.aclMatch : defaultPrefix;
      if (isPrimary && ann.host) wanted.push({ kind: "host", host: ann.host });
      wanted.push({ kind: "path", prefix });
      let routed = 0;
      for (const match of wanted) {
        const key = matchKey(match);
        const owner = claimedRoutes.get(key);
        if (owner) {
          warnings.push({ service: id, port: sp.port, message: `${key} is already routed to ${owner}; this route is skipped` });
          continue;
        }
        claimedRoutes.set(key, backendName);
        routed++;
        routes.push({ backend: backendName, match, action });
      }
      if (routed === 0) {
        skip("every route it asks for is taken by another Service", sp.port);
        continue;
      }
      const hostRouted = isPrimary && ann.host && claimedRoutes.get(`host ${hostKey(ann.host)}`) === backendName ? ann.host : null;
      const ownsPath = claimedRoutes.get(`path ${prefix}`) === backendName;
      if (ownsPath && !(isPrimary && ann.aclMatch !== undefined)) backend.strip = { prefix, unlessHost: hostRouted };
      backends.push(backend);
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
