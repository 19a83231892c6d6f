import type { ServerSlot } from "./model.js";

/** FNV-1a, 32 bit: cheap, stable across processes and versions, good enough to spread a few addresses. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * Places endpoints into a power-of-two number of server slots by hashing their address. An
 * endpoint keeps its slot while others come and go (unless the slot count changes), so the agent
 * can apply scale-ups and scale-downs through the runtime API, and stick tables that remember a
 * server keep pointing at the same pod.
 */
export function assignSlots(addresses: readonly string[], minSlots: number, withCookies: boolean): ServerSlot[] {
  const count = Math.max(nextPowerOfTwo(minSlots), nextPowerOfTwo(addresses.length));
  const taken: Array<string | null> = new Array<string | null>(count).fill(null);
  for (const address of addresses) {
    let i = fnv1a(address) % count;
    while (taken[i] !== null) i = (i + 1) % count;
    taken[i] = address;
  }
  const cookies = new Set<string>();
  return taken.map((address, i) => {
    let cookie: string | null = null;
    if (withCookies && address !== null) {
      cookie = fnv1a(address).toString(16).padStart(8, "0");
      // Two addresses hashing alike would share a cookie; the slot suffix keeps them apart.
      if (cookies.has(cookie)) cookie = `${cookie}-${i + 1}`;
      cookies.add(cookie);
    }
    return { name: `s${i + 1}`, address, cookie };
  });
}
