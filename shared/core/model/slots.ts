/** FNV-1a, 32 bit: cheap, stable across processes and versions, good enough to spread a few addresses. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Whether the agent can give a backend more server slots at runtime (`add server`, HAProxy 2.6):
 * its algorithm is one HAProxy calls dynamic (not `source`, a map-based hash), it has no cookie
 * affinity (`add server` takes no `cookie`), and its servers carry no health check (a checked
 * server costs a descriptor, which only the check stage counts; core/model/descriptors.ts).
 */
export function growsAtRuntime(algorithm: string, affinity: "none" | "source" | "cookie", check: boolean): boolean {
  return (
    (algorithm === "roundrobin" || algorithm === "leastconn" || algorithm === "first") &&
    affinity !== "cookie" &&
    !check
  );
}

/**
 * The server slots a backend of `endpoints` endpoints starts with, at least `minSlots`, and one
 * more than its endpoints: the free slot a pod replaced in place moves through (make before
 * break, runtime-plan.ts). A backend keeps its slots while its endpoints fit with one free
 * (backend-layout.ts), and one that `growsAtRuntime` gets the slots a surge needs added at
 * runtime; so neither a rollout nor a step of the autoscaler reloads, and a node holds one
 * server line per endpoint and one more. A backend that cannot grow at runtime starts with room
 * for a rolling update's surge as well (Kubernetes' default maxSurge, 25 % rounded up, is at
 * least one pod). `surge` false: exactly the endpoints (--forward-services: one ClusterIP that
 * never moves).
 */
export function slotCount(endpoints: number, minSlots: number, surge = true, grows = false): number {
  if (!surge) return Math.max(minSlots, endpoints);
  if (endpoints === 0) return minSlots;
  return Math.max(minSlots, endpoints + (grows ? 0 : Math.ceil(endpoints / 4)) + 1);
}

/** Whether a backend of `count` slots can keep them for `endpoints` endpoints: one slot stays free. */
export function slotsFit(endpoints: number, count: number): boolean {
  return endpoints < count;
}

/**
 * Places endpoints into `count` server slots by hashing their address modulo `hashSlots` (the
 * count the backend was placed with; `count` itself unless it grew at runtime): the address of
 * each slot, null for a free one. An endpoint keeps its slot while others come and go (unless
 * the slot count changes), so the agent can apply scale-ups and scale-downs through the runtime
 * API, and stick tables that remember a server keep pointing at the same pod. Slots added by
 * growth take only endpoints the first `hashSlots` cannot hold, so growing moves no endpoint
 * that still fits where it was.
 */
export function assignSlots(addresses: readonly string[], count: number, hashSlots = count): Array<string | null> {
  if (addresses.length > count) throw new RangeError(`${addresses.length} endpoints do not fit ${count} slots`);
  const base = Math.min(hashSlots, count);
  const slots: Array<string | null> = new Array<string | null>(count).fill(null);
  let inBase = 0;
  let next = base;
  for (const address of addresses) {
    if (inBase === base) {
      slots[next++] = address;
      continue;
    }
    let i = fnv1a(address) % base;
    while (slots[i] !== null) i = (i + 1) % base;
    slots[i] = address;
    inBase++;
  }
  return slots;
}

/** The cookie of each slot for cookie stickiness: a hash of its address, so it follows the pod; null for a free slot. */
export function slotCookies(slots: ReadonlyArray<string | null>): Array<string | null> {
  const seen = new Set<string>();
  return slots.map((address, i) => {
    if (address === null) return null;
    let cookie = fnv1a(address).toString(16).padStart(8, "0");
    // Two addresses hashing alike would share a cookie; the slot suffix keeps them apart.
    if (seen.has(cookie)) cookie = `${cookie}-${i + 1}`;
    seen.add(cookie);
    return cookie;
  });
}

/** One string per slot name for every backend and render, rather than a new one per server line. */
const names: string[] = [];

/** The name of the slot at position i: s1…sN, stable within its backend. */
export function slotName(i: number): string {
  while (names.length <= i) names.push(`s${names.length + 1}`);
  return names[i]!;
}
