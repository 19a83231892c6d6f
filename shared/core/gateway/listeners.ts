/*
 * A Gateway's listeners, each with the conditions the spec gives it (Accepted, ResolvedRefs,
 * Conflicted, Programmed pending) and whether it takes routes. HTTP and HTTPS (tls mode
 * Terminate) are served; an HTTPS listener takes routes only with a certificate every reporting
 * node holds (certificates.ts). Listeners of one port, across Gateways, are one frontend: HTTP
 * and HTTPS listeners on one port conflict (ProtocolConflict).
 */

import { entryOf } from "../render/map-entry.js";
import { type HeldCertificates, type ListenerCertificates, listenerCertificates } from "./certificates.js";
import {
  GATEWAY_GROUP,
  type Gateway,
  type GatewayLabelSelector,
  type Listener,
  type ReferenceGrant,
} from "./schemas.js";
import { type Condition, condition, type ListenerStatus } from "./status.js";

const ROUTE_KIND = { group: GATEWAY_GROUP, kind: "HTTPRoute" };

export interface ListenerState {
  gateway: Gateway;
  listener: Listener;
  /** It takes routes: accepted, not conflicted, HTTPRoute among its kinds, a certificate when HTTPS. */
  open: boolean;
  /** The certificate refs an HTTPS listener binds (`namespace/name`); none for HTTP. */
  certificates: string[];
  routes: Set<string>;
  status: ListenerStatus;
}

/** What the listeners of every Gateway of servicelb's class share. */
export interface ListenerContext {
  /** --http-port, and the ports the config binds for something else (resolve.ts GatewayPorts). */
  ports: { httpPort: number; reserved: ReadonlyMap<number, string> };
  grants: readonly ReferenceGrant[];
  held: HeldCertificates;
  /** The served protocols (HTTP, HTTPS) of the listeners of each port, across Gateways. */
  protocolsAt: ReadonlyMap<number, ReadonlySet<string>>;
  /** The certificates each port binds so far, filled in Gateway and listener order. */
  boundAt: Map<number, string[]>;
}

/**
 * The most certificates one port binds: they are words of its bind line, and HAProxy reads at
 * most 64 words a line (`bind`, the address, `ssl`, `crt <path>` each, `ssl-min-ver TLSv1.2`).
 */
export const MAX_PORT_CERTIFICATES = 29;

/** Takes the listener's usable certificates into its port's bind, as far as they fit; those that do not are problems. */
function bindCertificates(listener: Listener, certs: ListenerCertificates, boundAt: Map<number, string[]>): void {
  const bound = entryOf(boundAt, listener.port, () => []);
  certs.usable = certs.usable.filter((c) => {
    if (bound.includes(c)) return true;
    if (bound.length < MAX_PORT_CERTIFICATES) {
      bound.push(c);
      return true;
    }
    certs.problems.push({
      reason: "InvalidCertificateRef",
      message: `certificate ${c}: port ${listener.port} binds at most ${MAX_PORT_CERTIFICATES} certificates`,
    });
    return false;
  });
}

const SERVED = new Set(["HTTP", "HTTPS"]);

/**
 * The protocols of each port's HTTP and HTTPS listeners, across Gateways: those that are accepted,
 * so that a refused listener (an HTTPS one on --http-port) takes nothing from the others.
 */
export function protocolsByPort(
  gateways: readonly Gateway[],
  ports: ListenerContext["ports"],
): Map<number, Set<string>> {
  const at = new Map<number, Set<string>>();
  for (const g of gateways)
    for (const l of g.spec.listeners)
      if (refusal(l, ports) === null) entryOf(at, l.port, () => new Set()).add(l.protocol);
  return at;
}

export function selects(selector: GatewayLabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels)) if (labels[k] !== v) return false;
  return selector.matchExpressions.every((e) => {
    const has = Object.hasOwn(labels, e.key);
    switch (e.operator) {
      case "In":
        return has && e.values.includes(labels[e.key]!);
      case "NotIn":
        return !has || !e.values.includes(labels[e.key]!);
      case "Exists":
        return has;
      default:
        return !has;
    }
  });
}

/** Why the listener's protocol or port cannot be served, as its Accepted condition's reason and message; null when it can. */
function refusal(listener: Listener, ports: ListenerContext["ports"]): [string, string] | null {
  const { protocol, port } = listener;
  if (protocol === "HTTPS" && listener.tls?.mode === "Passthrough")
    return ["UnsupportedProtocol", "HTTPS with tls.mode Passthrough is not supported: Terminate only"];
  if (!SERVED.has(protocol))
    return ["UnsupportedProtocol", `protocol ${protocol} is not supported: HTTP and HTTPS only`];
  const reserved = ports.reserved.get(port);
  if (reserved !== undefined) return ["PortUnavailable", `port ${port} is ${reserved}`];
  if (protocol === "HTTPS" && port === ports.httpPort)
    return ["PortUnavailable", `port ${port} is the HTTP frontend's (--http-port), which serves plain HTTP`];
  return null;
}

export function listenerStates(gateway: Gateway, ctx: ListenerContext): ListenerState[] {
  const gen = gateway.metadata.generation ?? 0;
  const { listeners } = gateway.spec;
  return listeners.map((listener) => {
    const conditions: Condition[] = [];
    const twins = listeners.filter((l) => l.port === listener.port && l.hostname === listener.hostname);
    const refused = refusal(listener, ctx.ports);
    const accepted = refused === null;
    conditions.push(
      refused
        ? condition("Accepted", false, ...refused, gen)
        : condition("Accepted", true, "Accepted", "listener is accepted", gen),
    );
    const https = accepted && listener.protocol === "HTTPS";
    const certs = https ? listenerCertificates(gateway, listener, ctx.grants, ctx.held) : { usable: [], problems: [] };
    const mixed = accepted && (ctx.protocolsAt.get(listener.port)?.size ?? 0) > 1;
    const conflicted = twins.length > 1 || mixed;
    if (https && !conflicted) bindCertificates(listener, certs, ctx.boundAt);
    const kinds = listener.allowedRoutes.kinds;
    const supported =
      kinds === null
        ? [ROUTE_KIND]
        : kinds.filter((k) => (k.group ?? GATEWAY_GROUP) === GATEWAY_GROUP && k.kind === "HTTPRoute");
    const badKinds = kinds !== null && supported.length < kinds.length;
    const problem = certs.problems[0];
    conditions.push(
      badKinds
        ? condition(
            "ResolvedRefs",
            false,
            "InvalidRouteKinds",
            "only HTTPRoute (gateway.networking.k8s.io) is supported",
            gen,
          )
        : problem
          ? condition(
              "ResolvedRefs",
              false,
              problem.reason,
              `${certs.problems.map((p) => p.message).join("; ")}${certs.usable.length > 0 ? ` (served with ${certs.usable.join(", ")})` : ""}`,
              gen,
            )
          : condition("ResolvedRefs", true, "ResolvedRefs", "references are resolved", gen),
    );
    conditions.push(
      twins.length > 1
        ? condition(
            "Conflicted",
            true,
            "HostnameConflict",
            `another listener has port ${listener.port} and the same hostname`,
            gen,
          )
        : mixed
          ? condition(
              "Conflicted",
              true,
              "ProtocolConflict",
              `port ${listener.port} has both HTTP and HTTPS listeners (across Gateways, one frontend per port)`,
              gen,
            )
          : condition("Conflicted", false, "NoConflicts", "no conflicts", gen),
    );
    const open = accepted && !conflicted && supported.length > 0 && (!https || certs.usable.length > 0);
    conditions.push({
      type: "Programmed",
      status: open ? "Unknown" : "False",
      reason: open ? "Pending" : "Invalid",
      message: open ? "waiting for the fleet to run the config" : "listener is not served",
      observedGeneration: gen,
    });
    return {
      gateway,
      listener,
      open,
      certificates: open ? certs.usable : [],
      routes: new Set<string>(),
      status: {
        name: listener.name,
        supportedKinds: supported.map(() => ({ ...ROUTE_KIND })),
        attachedRoutes: 0,
        conditions,
      },
    };
  });
}
