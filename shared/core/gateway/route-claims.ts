/*
 * Which hosts and paths an HTTPRoute may serve, by the rules the Services' own claims follow
 * (kubernetes/ownership.ts), so that a Gateway that admits routes from every namespace is not a
 * way around them:
 *
 * - --host-claims holds on every listener port: a route of namespace N serves only the hosts it
 *   gives N, and a route that names no host (any host) is refused where it is set.
 * - On --http-port, Gateway routes are tried before the Services' routes (resolve.ts), so there:
 *   - a hostname that is the load balancer's own (localhost, --own-hosts, an IP address) is
 *     refused, as lb.host is: the Services' paths answer on those names;
 *   - a host that a Service of another namespace claims with lb.host (or a wildcard over it, or
 *     any host) goes to the older of the two, by creationTimestamp and then namespace/name, as
 *     contested Service claims do: a newcomer never takes a host from its owner. The Service's
 *     host route is withheld when the route is older;
 *   - a route that names no host answers on the load balancer's own names too, where the
 *     Services' paths live: it may not match a path that a Service of another namespace routes.
 * A route's own namespace is never refused for its own Services' claims: one team, one decision.
 * A refusal fails the whole route on that listener, never part of its hostnames.
 */

import { compareStrings } from "../compare.js";
import { hostClaimsRefusal, type HostPolicy, ownNameRefusal } from "../kubernetes/ownership.js";
import type { Service } from "../kubernetes/snapshot.js";
import { ANNOTATIONS } from "../model/annotations.js";
import { hostText, hostWithin, type HostMatch } from "../model/host-match.js";
import type { HttpRoute, Model, Warning } from "../model/model.js";
import type { PathMatch } from "./routing.js";

/** What one route asks of one listener port. */
export interface RouteClaim {
  /** `namespace/name`. */
  route: string;
  namespace: string;
  /** creationTimestamp in ms; Infinity when unknown. */
  created: number;
  port: number;
  /** The effective hostnames; null for any host. */
  hosts: readonly HostMatch[] | null;
  paths: readonly PathMatch[];
}

interface ServiceClaim {
  route: HttpRoute;
  /** `namespace/name` of the Service. */
  service: string;
  namespace: string;
  created: number;
}

const older = (a: { created: number; id: string }, b: { created: number; id: string }) =>
  a.created !== b.created ? a.created < b.created : compareStrings(a.id, b.id) < 0;

const overlaps = (a: HostMatch, b: HostMatch) => hostWithin(a, b) || hostWithin(b, a);

/** Conservative on purpose: a prefix either way counts, whatever the segment boundaries. */
const pathsMeet = (p: PathMatch, prefix: string) =>
  p.value.startsWith(prefix) || (p.type === "PathPrefix" && prefix.startsWith(p.value));

export class RouteClaims {
  private readonly hosts: ServiceClaim[] = [];
  private readonly paths: ServiceClaim[] = [];
  private readonly withheld = new Map<HttpRoute, { claim: ServiceClaim; by: string }>();

  constructor(
    private readonly model: Model,
    services: readonly Service[],
    private readonly policy: HostPolicy,
  ) {
    const created = new Map(
      services.map((s) => {
        const t = s.metadata.creationTimestamp;
        return [`${s.metadata.namespace}/${s.metadata.name}`, t ? Date.parse(t) : Number.POSITIVE_INFINITY];
      }),
    );
    const backends = new Map(model.backends.map((b) => [b.name, b]));
    for (const route of model.httpRoutes) {
      const b = backends.get(route.backend);
      if (!b) continue;
      // A Service held in a spare backend (model/backend-layout.ts) is the one the spare carries.
      const owner = b.carries ?? b;
      const service = `${owner.namespace}/${owner.service}`;
      const claim = {
        route,
        service,
        namespace: owner.namespace,
        created: created.get(service) ?? Number.POSITIVE_INFINITY,
      };
      (route.match.kind === "host" ? this.hosts : this.paths).push(claim);
    }
  }

  /** Why the route may not serve its hosts and paths on its port, or null (its wins then stand). */
  admit(claim: RouteClaim): string | null {
    for (const host of claim.hosts ?? [null]) {
      const refused = hostClaimsRefusal(host, claim.namespace, this.policy);
      if (refused) return refused.reason;
    }
    if (claim.port !== this.model.options.httpPort) return null;
    const wins: ServiceClaim[] = [];
    for (const host of claim.hosts ?? []) {
      const own = ownNameRefusal(host, claim.namespace, this.policy);
      if (own) return `${own.reason}, on --http-port`;
    }
    const contender = { created: claim.created, id: claim.route };
    for (const held of this.hosts) {
      if (held.namespace === claim.namespace || this.withheld.has(held.route)) continue;
      const host = (held.route.match as { host: HostMatch }).host;
      if (claim.hosts !== null && !claim.hosts.some((h) => overlaps(h, host))) continue;
      if (older(contender, { created: held.created, id: held.service })) wins.push(held);
      else {
        const asked = claim.hosts === null ? "any host" : claim.hosts.map(hostText).join(", ");
        return `${asked} on --http-port meets host ${hostText(host)}, which Service ${held.service} claims (lb.host) and is older`;
      }
    }
    if (claim.hosts === null)
      for (const held of this.paths) {
        if (held.namespace === claim.namespace) continue;
        const prefix = (held.route.match as { prefix: string }).prefix;
        const path = claim.paths.find((p) => pathsMeet(p, prefix));
        if (path)
          return `names no host, so on --http-port it answers on the load balancer's own names, where Service ${held.service} routes ${prefix} (${path.type} ${path.value} meets it): give the route a hostname or a listener on a port of its own`;
      }
    for (const held of wins) this.withheld.set(held.route, { claim: held, by: claim.route });
    return null;
  }

  /** The model without the Service host routes that older HTTPRoutes took, each said in a warning. */
  settle(model: Model): Model {
    if (this.withheld.size === 0) return model;
    const warnings: Warning[] = [...this.withheld.values()].map(({ claim, by }) => ({
      service: claim.service,
      annotation: ANNOTATIONS.host,
      owner: `HTTPRoute ${by}`,
      message: `host ${hostText((claim.route.match as { host: HostMatch }).host)} is served on --http-port by HTTPRoute ${by}, which is older; not routed there`,
    }));
    return {
      ...model,
      httpRoutes: model.httpRoutes.filter((r) => !this.withheld.has(r)),
      warnings: [...model.warnings, ...warnings],
    };
  }
}
