import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { assignSlots, fnv1a } from "../../../shared/core/slots.js";

// What the agent's runtime updates rely on: an endpoint keeps its slot while others come and go.

const endpoint = fc
  .tuple(fc.integer({ min: 1, max: 254 }), fc.integer({ min: 1, max: 254 }))
  .map(([a, b]) => `10.0.${a}.${b}:8080`);

describe("assignSlots", () => {
  it("makes a power-of-two number of slots, at least the minimum and enough for every endpoint", () => {
    expect(assignSlots([], 4, false)).toHaveLength(4);
    expect(assignSlots(["10.0.0.1:80"], 3, false)).toHaveLength(4);
    expect(
      assignSlots(
        Array.from({ length: 5 }, (_, i) => `10.0.0.${i + 1}:80`),
        4,
        false,
      ),
    ).toHaveLength(8);
    expect(assignSlots(["10.0.0.1:80"], 1, false)).toHaveLength(1);
  });

  it("places every endpoint once and names slots s1…sN", () => {
    fc.assert(
      fc.property(fc.uniqueArray(endpoint, { maxLength: 20 }), fc.constantFrom(1, 2, 4, 8), (eps, min) => {
        const slots = assignSlots(eps, min, false);
        expect(slots.map((s) => s.name)).toEqual(slots.map((_, i) => `s${i + 1}`));
        expect(
          slots
            .map((s) => s.address)
            .filter((a) => a !== null)
            .sort(),
        ).toEqual([...eps].sort());
      }),
    );
  });

  it("keeps an endpoint in its slot when others whose home slots differ are added or removed", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(endpoint, { minLength: 1, maxLength: 6 }),
        fc.uniqueArray(endpoint, { maxLength: 6 }),
        (kept, others) => {
          const count = 16;
          const home = (ep: string) => fnv1a(ep) % count;
          const newcomers = others.filter((o) => !kept.includes(o));
          // Distinct home slots: no endpoint probes into another's (a newcomer that does may displace
          // one, and that change then costs a slot move, still a runtime change).
          fc.pre(new Set([...kept, ...newcomers].map(home)).size === kept.length + newcomers.length);
          const before = assignSlots(kept, count, false);
          const after = assignSlots([...newcomers, ...kept].sort(), count, false);
          for (const ep of kept) {
            expect(before[home(ep)]!.address).toBe(ep);
            expect(after[home(ep)]!.address).toBe(ep);
          }
        },
      ),
    );
  });

  it("gives cookies that follow the endpoint, not its position, and never share one", () => {
    const a = assignSlots(["10.0.0.1:80", "10.0.0.2:80"], 4, true);
    const b = assignSlots(["10.0.0.2:80", "10.0.0.9:80", "10.0.0.1:80"], 4, true);
    const cookieOf = (slots: typeof a, ep: string) => slots.find((s) => s.address === ep)!.cookie;
    expect(cookieOf(b, "10.0.0.1:80")).toBe(cookieOf(a, "10.0.0.1:80"));
    expect(cookieOf(b, "10.0.0.2:80")).toBe(cookieOf(a, "10.0.0.2:80"));
    const cookies = b.map((s) => s.cookie).filter((c) => c !== null);
    expect(new Set(cookies).size).toBe(cookies.length);
    expect(assignSlots(["10.0.0.1:80"], 4, false).every((s) => s.cookie === null)).toBe(true);
  });
});
