/*
 * The one hook of the Gateway API into a render (core/render/pipeline.ts): the model with the resolved
 * routing and its warnings, or the very model it was given when the snapshot holds no Gateway
 * API objects, so that such renders stay byte for byte what they were.
 */

import type { HeldCertificates } from "./certificates.js";
import { matchesSelector } from "../kubernetes/label-selector.js";
import type { Model } from "../model/model.js";
import { type GatewayPorts, resolveGateway } from "./resolve.js";
import { RouteClaims } from "./route-claims.js";
import type { Snapshot } from "../kubernetes/snapshot.js";

/** The ports the config binds for something else than Gateway listeners. */
export function gatewayPorts(model: Model): GatewayPorts {
  const o = model.options;
  const reserved = new Map<number, string>([[o.statsPort, "the stats page's (--stats-port)"]]);
  if (o.sslCert !== undefined) reserved.set(o.httpsPort, "the HTTPS frontend's (--https-port)");
  for (const t of model.tcpFrontends) reserved.set(t.port, `the TCP frontend ${t.name}'s (--tcp-services)`);
  return {
    httpPort: o.httpPort,
    reserved,
    inScope: (svc) =>
      (!o.namespace || svc.metadata.namespace === o.namespace) &&
      (!o.selector || matchesSelector(o.selector, svc.metadata.labels)),
  };
}

/**
 * `routesByMap`: the template places the HTTP frontend's route maps, which is where a listener on
 * --http-port goes; with another template such a listener is refused as its port is taken.
 * `certificates`: what the nodes hold for HTTPS listeners (certificates.ts); absent, none.
 */
export function withGateway(
  model: Model,
  snapshot: Snapshot,
  routesByMap: boolean,
  certificates?: HeldCertificates,
): Model {
  if (!snapshot.gateway) return model;
  const ports = gatewayPorts(model);
  if (certificates) ports.certificates = certificates;
  if (!routesByMap) {
    const reserved = new Map(ports.reserved);
    reserved.set(ports.httpPort, "the HTTP frontend's, whose template has no route maps to place Gateway routes in");
    ports.reserved = reserved;
  }
  const claims = new RouteClaims(model, snapshot.services, model.options);
  ports.admit = (claim) => claims.admit(claim);
  const gateway = resolveGateway(snapshot, ports);
  if (!gateway) return model;
  const settled = claims.settle(model);
  const warnings = gateway.warnings.map((message) => ({ service: "gateway", message }));
  return {
    ...settled,
    gateway,
    warnings: warnings.length > 0 ? [...settled.warnings, ...warnings] : settled.warnings,
  };
}
