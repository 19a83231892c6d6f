/*
 * Who may route what, when Services of different tenants ask for the same thing.
 *
 * - Every HTTP port has its own path (`/<name>[:<port>]` in `default`, `/<namespace>/<name>[:<port>]`
 *   elsewhere). No one else may claim it or anything below it.
 * - A namespace other than `default` holds the path space `/<namespace>/`: Services elsewhere may
 *   not claim a path in it (its own Services are routed there by default).
 * - The two meet in one place: `default/<ns>`'s own path `/<ns>` covers `/<ns>/…`. The older of the
 *   Service and the namespace (its oldest Service) holds `/<ns>/`; the other's own paths there are
 *   withheld, so that no two tenants ever share a prefix and longest-prefix matching never decides.
 * - A claim that covers another tenant's space takes its unrouted paths (`/` takes `/shop/other`);
 *   only `/` can cover a space without lying in one, so it is refused while anyone else holds one.
 * - The load balancer's own names (IP addresses, localhost, --own-hosts) are not hosts to claim:
 *   a host claim takes every path, and clients that reach the node by its own name expect paths.
 * - Anything else (a host, a path in the shared space) goes to the oldest claim, by
 *   creationTimestamp and then namespace/name, as the Gateway API settles conflicting routes: a
 *   newcomer never displaces an existing owner. A more specific host or path is a different claim.
 */

import { compareStrings } from "../compare.js";
import { hostText, hostWithin, isAddress, type HostMatch } from "../model/host-match.js";

/** A Service port that claims something. */
export interface Claimant {
  /** `namespace/name` of the Service. */
  service: string;
  namespace: string;
  backend: string;
}

/** Why a claim is refused: who owns the thing claimed (a Service, `<namespace>/*`, or a setting), in words. */
export interface Refusal {
  owner: string;
  reason: string;
}

/** The owner named when a host is the load balancer's own. */
export const OWN_HOSTS = "--own-hosts";

/** RFC 6761 keeps localhost and every name under it on the loopback: the node itself, always. */
const ALWAYS_OWN: readonly HostMatch[] = [
  { name: "localhost", wildcard: false },
  { name: "localhost", wildcard: true },
];

export interface HostPolicy {
  ownHosts?: readonly HostMatch[] | undefined;
  hostClaims?: Readonly<Record<string, readonly HostMatch[]>> | undefined;
}

/**
 * Why a Service of `namespace` may not claim `host` with lb.host, or null. The load balancer's own
 * names come first, so an operator's --own-hosts wins over --host-claims; an IP address is the
 * node's own too unless --host-claims gives that very address to the namespace.
 */
export function hostRefusal(host: HostMatch, namespace: string, policy: HostPolicy): Refusal | null {
  return ownNameRefusal(host, namespace, policy) ?? hostClaimsRefusal(host, namespace, policy);
}

/** Why `host` is the load balancer's own name (where the Services' paths answer), or null. */
export function ownNameRefusal(host: HostMatch, namespace: string, policy: HostPolicy): Refusal | null {
  const text = hostText(host);
  for (const own of [...ALWAYS_OWN, ...(policy.ownHosts ?? [])]) {
    const relation = hostWithin(host, own) ? "is" : hostWithin(own, host) ? "covers" : null;
    if (relation === null) continue;
    const source = ALWAYS_OWN.includes(own) ? "always is" : `in ${OWN_HOSTS}`;
    return {
      owner: OWN_HOSTS,
      reason: `${text} ${relation} one of the load balancer's own names (${hostText(own)} ${source}), where every path route answers`,
    };
  }
  const allowed = policy.hostClaims?.[namespace];
  const addressGiven = !host.wildcard && allowed?.some((p) => !p.wildcard && p.name === host.name) === true;
  if (isAddress(host) && !addressGiven) {
    const what = host.wildcard ? "names IP addresses only, which are" : "is an IP address, which is";
    return {
      owner: OWN_HOSTS,
      reason: `${text} ${what} the load balancer's own, where every path route answers (only --host-claims can give an address to a namespace)`,
    };
  }
  return null;
}

/** Why --host-claims keeps `namespace` from `host` (null: any host), or null when it allows it or is not set. */
export function hostClaimsRefusal(host: HostMatch | null, namespace: string, policy: HostPolicy): Refusal | null {
  if (!policy.hostClaims) return null;
  const allowed = policy.hostClaims[namespace] ?? [];
  if (host !== null && allowed.some((pattern) => hostWithin(host, pattern))) return null;
  const list = allowed.length > 0 ? `only ${allowed.map(hostText).join(", ")}` : "no host";
  const text = host === null ? "any host" : hostText(host);
  return { owner: "--host-claims", reason: `${text}: --host-claims allows namespace ${namespace} ${list}` };
}

/**
 * Which path prefixes belong to whom, independent of any custom path. Services are added oldest
 * first (oldestFirst), so whoever comes first to `/<ns>/` is the older.
 */
export class PathSpaces {
  /** Own paths that are routed. */
  private readonly ownPaths = new Map<string, Claimant>();
  /** Own paths that are not, with who holds them. */
  private readonly withheld = new Map<string, Refusal>();
  /** Namespaces with a Service: null when the namespace holds `/<ns>/`, else the default Service that does. */
  private readonly namespaces = new Map<string, string | null>();

  /** A Service, in claim order: the first of a namespace is its oldest. */
  addService(namespace: string): void {
    if (namespace === "default" || this.namespaces.has(namespace)) return;
    const owner = this.ownPaths.get(`/${namespace}`);
    this.namespaces.set(namespace, owner ? owner.service : null);
  }

  /** An HTTP port's own path, after its Service was added. */
  addOwnPath(prefix: string, owner: Claimant): void {
    const first = prefix.split("/", 2)[1]!;
    const holder = this.namespaces.get(first);
    // A default Service's own paths are one segment: only port 80's, `/<name>`, can be a namespace's.
    if (owner.namespace === "default" && holder === null) {
      this.withheld.set(prefix, {
        owner: `${first}/*`,
        reason: `lies in namespace ${first}'s path space /${first}/, whose oldest Service is older`,
      });
    } else if (owner.namespace !== "default" && typeof holder === "string") {
      this.withheld.set(prefix, {
        owner: holder,
        reason: `lies in ${holder}'s own path /${first}, which is older than namespace ${first}'s oldest Service`,
      });
    } else {
      this.ownPaths.set(prefix, owner);
    }
  }

  /** Who holds a port's own path instead of it, or null when it is routed there. */
  ownPathRefusal(prefix: string): Refusal | null {
    return this.withheld.get(prefix) ?? null;
  }

  /** Why `prefix` (a custom path) is not the claimant's to take, or null when it may try. */
  refusal(prefix: string, claimant: Claimant): Refusal | null {
    if (prefix === "/") return this.coverRefusal(claimant);
    const first = prefix.split("/", 2)[1]!;
    if (first !== claimant.namespace && this.namespaces.get(first) === null) {
      return { owner: `${first}/*`, reason: `lies in namespace ${first}'s path space /${first}/` };
    }
    for (let end = prefix.length; end > 0; end = prefix.lastIndexOf("/", end - 1)) {
      const path = prefix.slice(0, end);
      const owner = this.ownPaths.get(path);
      if (owner && owner.backend !== claimant.backend)
        return { owner: owner.service, reason: `lies in ${owner.service}'s own path ${path}` };
    }
    return null;
  }

  /**
   * `/` covers every space. It may take what no one routes only where that is the claimant's own:
   * its namespace's space, or the shared space; `default` is no tenant's, so its other Services'
   * own paths are someone else's. Named deterministically: the first space, else the first path.
   */
  private coverRefusal(claimant: Claimant): Refusal | null {
    let space: string | undefined;
    for (const [ns, holder] of this.namespaces)
      if (holder === null && ns !== claimant.namespace && (space === undefined || compareStrings(ns, space) < 0))
        space = ns;
    if (space !== undefined)
      return { owner: `${space}/*`, reason: `covers namespace ${space}'s path space /${space}/` };
    let path: string | undefined;
    for (const [p, owner] of this.ownPaths)
      if (
        owner.namespace === "default" &&
        owner.service !== claimant.service &&
        (path === undefined || compareStrings(p, path) < 0)
      )
        path = p;
    if (path === undefined) return null;
    const owner = this.ownPaths.get(path)!.service;
    return { owner, reason: `covers ${owner}'s own path ${path}` };
  }
}

/** Plans in the order their claims are settled: oldest first, then namespace/name (their given order). */
export function oldestFirst<T extends { created: number }>(plans: readonly T[]): readonly T[] {
  for (let i = 1; i < plans.length; i++) {
    if (plans[i]!.created !== plans[0]!.created) {
      // Array sort is stable: equal ages keep their namespace/name order.
      return [...plans].sort((a, b) => (a.created === b.created ? 0 : a.created < b.created ? -1 : 1));
    }
  }
  return plans;
}
