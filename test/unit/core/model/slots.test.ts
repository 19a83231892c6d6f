import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  assignSlots,
  fnv1a,
  growsAtRuntime,
  slotCookies,
  slotCount,
  slotName,
  slotsFit,
} from "../../../../shared/core/model/slots.js";

// What the agent's runtime updates rely on: an endpoint keeps its slot while others come and go.

const endpoint = fc
  .tuple(fc.integer({ min: 1, max: 254 }), fc.integer({ min: 1, max: 254 }))
  .map(([a, b]) => `10.0.${a}.${b}:8080`);

describe("growsAtRuntime", () => {
  it.each([
    ["roundrobin", "none", false, true],
    ["leastconn", "source", false, true],
    ["first", "none", false, true],
    ["source", "none", false, false],
    ["roundrobin", "cookie", false, false],
    ["roundrobin", "none", true, false],
  ] as const)("%s, affinity %s, checked %s: %s", (algorithm, affinity, check, grows) => {
    expect(growsAtRuntime(algorithm, affinity, check)).toBe(grows);
  });
});

describe("slotCount, a backend that grows at runtime", () => {
  it.each([
    [0, 4, 4],
    [3, 4, 4],
    [4, 4, 5],
    [10, 4, 11],
    [1000, 4, 1001],
  ])("%i endpoints, at least %i: %i slots (one free)", (endpoints, min, slots) => {
    expect(slotCount(endpoints, min, true, true)).toBe(slots);
  });
});

describe("slotCount", () => {
  it.each([
    [0, 4, 4],
    [1, 4, 4],
    [2, 4, 4],
    [3, 4, 5],
    [4, 4, 6],
    [10, 4, 14],
    [20, 4, 26],
    [1000, 4, 1251],
    [3, 16, 16],
  ])("%i endpoints, at least %i: %i slots (a quarter more and one)", (endpoints, min, slots) => {
    expect(slotCount(endpoints, min)).toBe(slots);
  });

  it("leaves room for a rolling update's surge (25 % rounded up) with one slot free", () => {
    for (let n = 1; n <= 1000; n++) expect(slotsFit(n + Math.ceil(n / 4), slotCount(n, 1))).toBe(true);
  });

  it("without a surge (--forward-services), exactly the endpoints, at least the minimum", () => {
    expect(slotCount(1, 1, false)).toBe(1);
    expect(slotCount(0, 1, false)).toBe(1);
  });
});

describe("assignSlots", () => {
  it("refuses more endpoints than slots", () => {
    expect(() => assignSlots(["10.0.0.1:80", "10.0.0.2:80"], 1)).toThrow(RangeError);
  });

  it("places every endpoint once", () => {
    fc.assert(
      fc.property(fc.uniqueArray(endpoint, { maxLength: 20 }), fc.constantFrom(1, 2, 4, 8), (eps, min) => {
        expect(
          assignSlots(eps, slotCount(eps.length, min))
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
          const before = assignSlots(kept, count);
          const after = assignSlots([...newcomers, ...kept].sort(), count);
          for (const ep of kept) {
            expect(before[home(ep)]).toBe(ep);
            expect(after[home(ep)]).toBe(ep);
          }
        },
      ),
    );
  });
});

describe("slotCookies", () => {
  it("gives cookies that follow the endpoint, not its position, and never share one", () => {
    const cookieOf = (slots: Array<string | null>, ep: string) => slotCookies(slots)[slots.indexOf(ep)];
    const a = assignSlots(["10.0.0.1:80", "10.0.0.2:80"], 4);
    const b = assignSlots(["10.0.0.2:80", "10.0.0.9:80", "10.0.0.1:80"], 4);
    expect(cookieOf(a, "10.0.0.1:80")).toMatch(/^[0-9a-f]{8}$/);
    expect(cookieOf(b, "10.0.0.1:80")).toBe(cookieOf(a, "10.0.0.1:80"));
    expect(cookieOf(b, "10.0.0.2:80")).toBe(cookieOf(a, "10.0.0.2:80"));
    const cookies = slotCookies(b).filter((c) => c !== null);
    expect(cookies).toHaveLength(3);
    expect(new Set(cookies).size).toBe(3);
  });

  it("has no cookie for a free slot, and keeps two addresses that hash alike apart by the slot's number", () => {
    // Two addresses FNV-1a hashes alike (found by a search over 10.0.0.0/14).
    const [x, y] = ["10.0.107.237:80", "10.2.219.40:80"];
    expect(fnv1a(x)).toBe(fnv1a(y));
    expect(slotCookies([null, x, y, null])).toEqual([null, "458bf936", "458bf936-3", null]);
  });
});

describe("slotName", () => {
  it("names slots s1…sN by position, in any order of asking", () => {
    expect([15, 0, 1023, 1].map(slotName)).toEqual(["s16", "s1", "s1024", "s2"]);
  });
});

describe("assignSlots in a backend that grew", () => {
  it("places endpoints that fit the first hashSlots slots as a backend of that size does, the added ones free", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(endpoint, { maxLength: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.nat({ max: 6 }),
        (addresses, base, grown) => {
          fc.pre(addresses.length <= base);
          const slots = assignSlots(addresses, base + grown, base);
          expect(slots.slice(0, base)).toEqual(assignSlots(addresses, base));
          expect(slots.slice(base).every((s) => s === null)).toBe(true);
        },
      ),
    );
  });

  it("puts what the first hashSlots cannot hold into the added slots, in order", () => {
    const addresses = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80", "10.0.0.5:80"];
    const slots = assignSlots(addresses, 6, 4);
    expect(new Set(slots.slice(0, 4))).toEqual(new Set(addresses.slice(0, 4)));
    expect(slots.slice(4)).toEqual(["10.0.0.5:80", null]);
  });
});
