/*
 * Snapshot + options → model: each Service planned by its own rules (service-plan.ts), then what
 * Services compete for settled between them (`assemble`). A warm instance passes a ModelCache
 * (model-cache.ts), which keeps what of the last pass still stands.
 */

import { ANNOTATIONS } from "./annotations.js";
import { EndpointIndex } from "../kubernetes/endpoints.js";
import { hostText, type HostMatch } from "./host-match.js";
import { oldestFirst, PathSpaces } from "../kubernetes/ownership.js";
import { parseServiceRef } from "../kubernetes/k8s-names.js";
import type { Backend, HttpRoute, Model, Skipped, TcpFrontend, Warning } from "./model.js";
import { compareStrings } from "../compare.js";
import type { RenderOptions } from "../settings/options.js";
import { OptionsError } from "../settings/settings.js";
import type { Snapshot } from "../kubernetes/snapshot.js";
import type { HeldCertificates } from "../gateway/certificates.js";
import type { Service } from "../kubernetes/snapshot-schemas.js";
import {
  changedServices,
  type ModelCache,
  planCached,
  reassemble,
  rememberLists,
  rememberModel,
} from "./model-cache.js";
import { compareServices, type PlanContext, planService, readyCount, type ServicePlan } from "./service-plan.js";

/** HAProxy answers from one buffer; a page larger than this would be cut (measured on 2.6). */
export const MAX_ERROR_PAGE_BYTES = 8192;

export interface BuildInputs {
  /** Body of --error-page, read by the caller. */
  errorPageBody?: string;
  /** The certificates the nodes hold for Gateway HTTPS listeners (gateway/certificates.ts), as the caller learnt them. */
  gatewayCertificates?: HeldCertificates;
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

  let plans: ServicePlan[];
  if (warm && changed) {
    plans = lists!.plans!.slice();
    for (const i of changed) plans[i] = planCached(warm, services[i]!, index, context);
  } else if (warm) {
    plans = new Array(services.length);
    warm.plans.begin();
    for (let i = 0; i < services.length; i++) plans[i] = planCached(warm, services[i]!, index, context);
    warm.plans.sweep();
  } else {
    plans = new Array(services.length);
    for (let i = 0; i < services.length; i++) plans[i] = planService(services[i]!, context);
  }

  if (!warm) return assemble(plans, snapshot, options, inputs);
  const model =
    reassemble(warm, plans, snapshot, options, inputs.errorPageBody) ??
    rememberModel(warm, plans, snapshot, options, inputs.errorPageBody, assemble(plans, snapshot, options, inputs));
  rememberLists(warm, snapshot, options, index, services === snapshot.services ? plans : null);
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
  for (const b of backends) readyServers += readyCount(b);
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
