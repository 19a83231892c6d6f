/*
 * The Gateway API objects of a snapshot, resolved into what the load balancer serves
 * (routing.ts) and the status each object gets (status.ts). Pure: the same snapshot gives the
 * same value whatever order its objects were listed in.
 *
 * Only GatewayClasses whose controllerName is servicelb's, the Gateways of those classes and the
 * HTTPRoute parents that name those Gateways are considered. Every Gateway shares the fleet's
 * addresses: listeners of one port, across Gateways, are one HAProxy frontend, and the port that
 * is --http-port is the HTTP frontend itself, where Gateway routes come before the Services' own.
 */

import type { Service, Snapshot } from "../kubernetes/snapshot.js";
import { backendShareProblems, BackendResolver, type RefProblem } from "./backend-refs.js";
import { effectiveHostnames } from "./hostnames.js";
import { comparePrecedence } from "./precedence.js";
import type { GatewayBackend, GatewayFrontend, GatewayRouting, MatchEntry, Redirect, ResolvedRule } from "./routing.js";
import type { RouteClaim } from "./route-claims.js";
import { checkRule, type CheckedRule } from "./rules.js";
import type { HeldCertificates } from "./certificates.js";
import { type ListenerState, listenerStates, protocolsByPort, selects } from "./listeners.js";
import { GATEWAY_GROUP } from "./schemas.js";
import { type Condition, condition, CONTROLLER_NAME, type GatewayStatus, type RouteParentStatus } from "./status.js";
import { compareStrings } from "../compare.js";
import { entryOf } from "../render/map-entry.js";

export interface GatewayPorts {
  /** --http-port: a listener there shares the HTTP frontend. */
  httpPort: number;
  /** Ports the config binds for something else, and what: a listener there is refused (PortUnavailable). */
  reserved: ReadonlyMap<number, string>;
  /** The Services backendRefs may reach (all when absent). */
  inScope?: (service: Service) => boolean;
  /** Why a route may not serve what it asks on a listener's port (route-claims.ts), or null; absent: anything. */
  admit?: (claim: RouteClaim) => string | null;
  /** The certificates the nodes hold (certificates.ts); absent: no node has reported any. */
  certificates?: HeldCertificates;
}

const NONE_HELD: HeldCertificates = { holders: [], unknown: "no node has reported the certificates it holds yet" };

const idOf = (m: { namespace: string; name: string }) => `${m.namespace}/${m.name}`;
const byId = <T extends { metadata: { namespace: string; name: string } }>(a: T, b: T) =>
  compareStrings(idOf(a.metadata), idOf(b.metadata));

interface FrontendBuild {
  port: number;
  entries: Map<string, MatchEntry>;
  rules: ResolvedRule[];
  ruleAt: Map<string, number>;
}

function redirectOn(spec: NonNullable<CheckedRule["redirect"]>, listenerPort: number): Redirect {
  const scheme = spec.scheme;
  const wellKnown = (scheme ?? "http") === "https" ? 443 : 80;
  // Spec: a port left out is the scheme's own when a scheme is given, else the listener's; the
  // Location leaves out the scheme's own port.
  const port = spec.port ?? (scheme !== null ? wellKnown : listenerPort);
  return { ...spec, port: port === wellKnown ? null : port };
}

/** Resolves the Gateway API objects; null when the snapshot holds none. */
export function resolveGateway(snapshot: Snapshot, ports: GatewayPorts): GatewayRouting | null {
  const objects = snapshot.gateway;
  if (!objects) return null;
  const status: GatewayStatus = { gatewayClasses: [], gateways: [], httpRoutes: [] };
  const warnings: string[] = [];

  const classes = objects.gatewayClasses
    .filter((c) => c.spec.controllerName === CONTROLLER_NAME)
    .sort((a, b) => compareStrings(a.metadata.name, b.metadata.name));
  for (const c of classes)
    status.gatewayClasses.push({
      name: c.metadata.name,
      conditions: [condition("Accepted", true, "Accepted", "servicelb serves this class", c.metadata.generation ?? 0)],
    });
  const classNames = new Set(classes.map((c) => c.metadata.name));

  const listenersOf = new Map<string, ListenerState[]>();
  const gateways = objects.gateways.filter((g) => classNames.has(g.spec.gatewayClassName)).sort(byId);
  const context = {
    ports,
    grants: objects.referenceGrants,
    held: ports.certificates ?? NONE_HELD,
    protocolsAt: protocolsByPort(gateways, ports),
    boundAt: new Map<number, string[]>(),
  };
  for (const gateway of gateways) {
    const states = listenerStates(gateway, context);
    listenersOf.set(idOf(gateway.metadata), states);
    for (const s of states) {
      // A listener served with some of its certificates still says why the others are not.
      const problem = s.status.conditions.find(
        (c) =>
          (c.status === "False" && (!s.open || c.type === "ResolvedRefs")) ||
          (c.type === "Conflicted" && c.status === "True"),
      );
      if (problem) warnings.push(`Gateway ${idOf(gateway.metadata)} listener ${s.listener.name}: ${problem.message}`);
    }
  }

  const labelsOf = new Map(objects.namespaces.map((n) => [n.metadata.name, n.metadata.labels]));
  const namespaceLabels = (ns: string) => labelsOf.get(ns) ?? { "kubernetes.io/metadata.name": ns };
  const allows = (s: ListenerState, routeNamespace: string): boolean => {
    const { from, selector } = s.listener.allowedRoutes.namespaces;
    if (from === "All") return true;
    if (from === "Same") return routeNamespace === s.gateway.metadata.namespace;
    return selector !== null && selects(selector, namespaceLabels(routeNamespace));
  };

  const resolver = new BackendResolver(snapshot, objects.referenceGrants, ports.inScope);
  const frontends = new Map<number, FrontendBuild>();

  for (const route of [...objects.httpRoutes].sort(byId)) {
    const rid = idOf(route.metadata);
    const gen = route.metadata.generation ?? 0;
    const timestamp = route.metadata.creationTimestamp;
    const created = timestamp ? Date.parse(timestamp) : Number.POSITIVE_INFINITY;
    const checked = route.spec.rules.map(checkRule);
    const refused = checked.flatMap((c, i) => (typeof c === "string" ? [`rule ${i}: ${c}`] : []));
    const valid = refused.length < checked.length;
    const refProblems: RefProblem[] = [];
    const picks = route.spec.rules.map((rule, i) =>
      typeof checked[i] === "string" || checked[i]!.redirect
        ? []
        : rule.backendRefs.map((ref) => {
            const r = resolver.resolve(route, ref);
            if ("backend" in r) return { backend: r.backend, weight: ref.weight };
            refProblems.push(r);
            return { backend: null, weight: ref.weight };
          }),
    );
    const resolvedRefs =
      refProblems.length === 0
        ? condition("ResolvedRefs", true, "ResolvedRefs", "all references are resolved", gen)
        : condition("ResolvedRefs", false, refProblems[0]!.reason, backendShareProblems(refProblems), gen);

    const parents: RouteParentStatus[] = [];
    for (const ref of route.spec.parentRefs) {
      if (ref.group !== GATEWAY_GROUP || ref.kind !== "Gateway") continue;
      const gatewayId = `${ref.namespace ?? route.metadata.namespace}/${ref.name}`;
      const states = listenersOf.get(gatewayId);
      if (!states) continue;
      const parentRef = {
        group: GATEWAY_GROUP,
        kind: "Gateway",
        namespace: ref.namespace ?? route.metadata.namespace,
        name: ref.name,
        ...(ref.sectionName !== null ? { sectionName: ref.sectionName } : {}),
        ...(ref.port !== null ? { port: ref.port } : {}),
      };
      const accepted = (ok: boolean, reason: string, message: string) =>
        condition("Accepted", ok, reason, message, gen);
      const conditions: Condition[] = [];
      const candidates = states.filter(
        (s) =>
          (ref.sectionName === null || s.listener.name === ref.sectionName) &&
          (ref.port === null || s.listener.port === ref.port),
      );
      const allowed = candidates.filter((s) => s.open && allows(s, route.metadata.namespace));
      const attached = allowed
        .map((s) => ({ s, hosts: effectiveHostnames(s.listener.hostname, route.spec.hostnames) }))
        .filter((a) => a.hosts === null || a.hosts.length > 0);
      if (candidates.length === 0)
        conditions.push(
          accepted(
            false,
            "NoMatchingParent",
            `Gateway ${gatewayId} has no listener that matches the sectionName and port`,
          ),
        );
      else if (allowed.length === 0) {
        const closed = candidates.filter((s) => !s.open).map((s) => s.listener.name);
        const why = closed.length > 0 ? ` (not served: ${closed.join(", ")}; see the Gateway's listener status)` : "";
        conditions.push(
          accepted(false, "NotAllowedByListeners", `no listener of Gateway ${gatewayId} allows this route${why}`),
        );
      } else if (attached.length === 0)
        conditions.push(accepted(false, "NoMatchingListenerHostname", "no hostname of the route matches a listener's"));
      else if (!valid) conditions.push(accepted(false, "UnsupportedValue", refused.join("; ")));
      else {
        const paths = checked.flatMap((c) => (typeof c === "string" ? [] : c.matches.map((m) => m.path)));
        const claimsRefused: string[] = [];
        const admitted = attached.filter(({ s, hosts }) => {
          const why = ports.admit?.({
            route: rid,
            namespace: route.metadata.namespace,
            created,
            port: s.listener.port,
            hosts,
            paths,
          });
          if (why) claimsRefused.push(`listener ${s.listener.name}: ${why}`);
          return !why;
        });
        if (admitted.length === 0) conditions.push(accepted(false, "NotAllowedByListeners", claimsRefused.join("; ")));
        else {
          conditions.push(accepted(true, "Accepted", "route is accepted"));
          for (const why of claimsRefused)
            warnings.push(`HTTPRoute ${rid} on Gateway ${gatewayId}: not served on ${why}`);
        }
        for (const { s, hosts } of admitted) {
          if (!s.routes.has(rid)) {
            s.routes.add(rid);
            s.status.attachedRoutes++;
          }
          const port = s.listener.port;
          const f = entryOf(frontends, port, () => ({ port, entries: new Map(), rules: [], ruleAt: new Map() }));
          checked.forEach((c, ruleIndex) => {
            if (typeof c === "string") return;
            const key = `${rid}#${ruleIndex}`;
            let rule = f.ruleAt.get(key);
            if (rule === undefined) {
              rule = f.rules.length;
              f.ruleAt.set(key, rule);
              f.rules.push({
                route: rid,
                ruleIndex,
                requestHeaders: c.requestHeaders,
                responseHeaders: c.responseHeaders,
                rewrite: c.rewrite,
                redirect: c.redirect ? redirectOn(c.redirect, port) : null,
                picks: picks[ruleIndex]!,
              });
            }
            for (const host of hosts ?? [null])
              c.matches.forEach((m, matchIndex) => {
                const hostKey = host === null ? "" : `${host.wildcard ? "*." : ""}${host.name}`;
                f.entries.set(`${hostKey} ${key}.${matchIndex}`, {
                  rule: rule!,
                  host,
                  ...m,
                  created,
                  route: rid,
                  ruleIndex,
                  matchIndex,
                });
              });
          });
        }
      }
      conditions.push(resolvedRefs);
      if (valid && refused.length > 0)
        conditions.push(condition("PartiallyInvalid", true, "UnsupportedValue", refused.join("; "), gen));
      parents.push({ parentRef, controllerName: CONTROLLER_NAME, conditions });
      for (const c of conditions)
        if (c.status === "False") warnings.push(`HTTPRoute ${rid} on Gateway ${gatewayId}: ${c.reason}: ${c.message}`);
    }
    if (parents.length > 0)
      status.httpRoutes.push({ namespace: route.metadata.namespace, name: route.metadata.name, parents });
  }

  for (const [id, states] of listenersOf) {
    const gateway = states[0]!.gateway;
    const gen = gateway.metadata.generation ?? 0;
    const anyOpen = states.some((s) => s.open);
    const [namespace, name] = id.split("/") as [string, string];
    status.gateways.push({
      namespace,
      name,
      conditions: [
        anyOpen
          ? condition("Accepted", true, "Accepted", "Gateway is accepted", gen)
          : condition("Accepted", false, "ListenersNotValid", "no listener can be served", gen),
        {
          type: "Programmed",
          status: anyOpen ? "Unknown" : "False",
          reason: anyOpen ? "Pending" : "Invalid",
          message: anyOpen ? "waiting for the fleet to run the config" : "no listener can be served",
          observedGeneration: gen,
        },
      ],
      listeners: states.map((s) => s.status),
    });
  }

  const built: GatewayFrontend[] = [...frontends.values()]
    .sort((a, b) => a.port - b.port)
    .map((f) => ({
      port: f.port,
      shared: f.port === ports.httpPort,
      // In Gateway and listener order: HAProxy picks one by SNI, the first when none matches.
      certificates: context.boundAt.get(f.port) ?? [],
      entries: [...f.entries.values()].sort(comparePrecedence),
      rules: f.rules,
    }));
  const used = new Set(built.flatMap((f) => f.rules.flatMap((r) => r.picks.map((p) => p.backend))));
  const backends: GatewayBackend[] = [...resolver.backends.values()]
    .filter((b) => used.has(b.name))
    .sort((a, b) => compareStrings(a.name, b.name));
  return { frontends: built, backends, status, warnings };
}
