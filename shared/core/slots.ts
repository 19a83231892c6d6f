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
 * The server slots a backend of `endpoints` endpoints starts with, at least `minSlots`: room for a
 * rolling update's surge (Kubernetes' default maxSurge, 25 % rounded up, is at least one pod)
 * with one slot still free, which a pod replaced in place needs to move through. A backend keeps
 * its slots while its endpoints fit with one free (backend-layout.ts): a rollout or a step of the
 * autoscaler changes no slot count, hence needs no reload. `surge` false: exactly the endpoints
 * (--forward-services: one ClusterIP that never moves).
 */
export function slotCount(endpoints: number, minSlots: number, surge = true): number {
  if (!surge) return Math.max(minSlots, endpoints);
  return Math.max(minSlots, endpoints === 0 ? 0 : endpoints + Math.ceil(endpoints / 4) + 1);
}

/** Whether a backend of `count` slots can keep them for `endpoints` endpoints: one slot stays free. */
export function slotsFit(endpoints: number, count: number): boolean {
  return endpoints < count;
}

/**
 * Places endpoints into `count` server slots by hashing their address: the address of each slot,
 * null for a free one. An endpoint keeps its slot while others come and go (unless the slot count
 * changes), so the agent can apply scale-ups and scale-downs through the runtime API, and stick
 * tables that remember a server keep pointing at the same pod.
 */
export function assignSlots(addresses: readonly string[], count: number): Array<string | null> {
  if (addresses.length > count) throw new RangeError(`${addresses.length} endpoints do not fit ${count} slots`);
  const slots: Array<string | null> = new Array<string | null>(count).fill(null);
  for (const address of addresses) {
    let i = fnv1a(address) % count;
    while (slots[i] !== null) i = (i + 1) % count;
    slots[i] = address;
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
