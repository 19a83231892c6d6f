/*
 * Who may route what, when Services of different tenants ask for the same thing.
 *
 * - Every HTTP port has its own path (`/<name>[:<port>]` in `default`, `/<namespace>/<name>[:<port>]`
 *   elsewhere). These never collide, and no one else may claim them or anything below them.
 * - A namespace other than `default` owns the path space `/<namespace>/`: Services elsewhere may
 *   not claim a path in it (their own Services are routed there by default).
 * - Anything else (a host, a path in the shared space) goes to the oldest claim, by
 *   creationTimestamp and then namespace/name, as the Gateway API settles conflicting routes: a
 *   newcomer never displaces an existing owner. A more specific host or path is a different claim.
 */

/** A Service port that claims something. */
export interface Claimant {
  /** `namespace/name` of the Service. */
  service: string;
  namespace: string;
  backend: string;
}

/** Why a claim is refused: who owns the thing claimed (a Service, or `<namespace>/*`), in words. */
export interface Refusal {
  owner: string;
  reason: string;
}

/** Which path prefixes belong to whom, independent of any claim. */
export class PathSpaces {
  private readonly ownPaths = new Map<string, Claimant>();
  private readonly namespaces = new Set<string>();

  addService(namespace: string): void {
    if (namespace !== "default") this.namespaces.add(namespace);
  }

  addOwnPath(prefix: string, owner: Claimant): void {
    this.ownPaths.set(prefix, owner);
  }

  /** Why `prefix` (a custom path) is not the claimant's to take, or null when it may try. */
  refusal(prefix: string, claimant: Claimant): Refusal | null {
    const first = prefix.split("/", 2)[1]!;
    const inOwnSpace = first === claimant.namespace && first !== "default";
    if (!inOwnSpace && this.namespaces.has(first)) {
      return { owner: `${first}/*`, reason: `lies in namespace ${first}'s path space /${first}/` };
    }
    // Its own namespace's space is its own even where a default Service `/<namespace>` exists:
    // the layout already routes `/<namespace>/<name>` to the namespace.
    const floor = inOwnSpace ? first.length + 1 : 0;
    for (let end = prefix.length; end > floor; end = prefix.lastIndexOf("/", end - 1)) {
      const path = prefix.slice(0, end);
      const owner = this.ownPaths.get(path);
      if (owner && owner.backend !== claimant.backend)
        return { owner: owner.service, reason: `lies in ${owner.service}'s own path ${path}` };
    }
    return null;
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
