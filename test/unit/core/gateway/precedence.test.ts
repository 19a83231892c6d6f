import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { comparePrecedence } from "../../../../shared/core/gateway/precedence.js";
import type { MatchEntry } from "../../../../shared/core/gateway/routing.js";

const entry = (over: Partial<MatchEntry>): MatchEntry => ({
  rule: 0,
  host: null,
  path: { type: "PathPrefix", value: "/" },
  method: null,
  headers: [],
  queryParams: [],
  created: 0,
  route: "default/r",
  ruleIndex: 0,
  matchIndex: 0,
  ...over,
});

const arbEntry = fc.record({
  host: fc.option(fc.record({ name: fc.constantFrom("a.com", "b.a.com", "x.b.a.com"), wildcard: fc.boolean() }), {
    nil: null,
  }),
  path: fc.record({
    type: fc.constantFrom("Exact" as const, "PathPrefix" as const),
    value: fc.constantFrom("/", "/a", "/a/b", "/ab"),
  }),
  method: fc.constantFrom(null, "GET"),
  headers: fc.array(fc.constant({ name: "h", value: "v" }), { maxLength: 3 }),
  queryParams: fc.array(fc.constant({ name: "q", value: "v" }), { maxLength: 2 }),
  created: fc.constantFrom(0, 1000, Number.POSITIVE_INFINITY),
  route: fc.constantFrom("a/r1", "a/r2", "b/r1"),
  ruleIndex: fc.nat(3),
  matchIndex: fc.nat(3),
  rule: fc.constant(0),
});

/** The draw that failed CI once: an entry compared with itself. */
const sameEntry = entry({});

/** What makes an entry distinct: two entries equal on this are the same entry. */
const identity = (e: MatchEntry) =>
  JSON.stringify([
    e.host,
    e.path,
    e.method,
    e.headers.length,
    e.queryParams.length,
    e.created,
    e.route,
    e.ruleIndex,
    e.matchIndex,
  ]);

describe("match precedence", () => {
  it.each([
    [
      "an exact host before a wildcard",
      { host: { name: "a.b.com", wildcard: false } },
      { host: { name: "longer.b.com", wildcard: true } },
    ],
    [
      "the longer wildcard first",
      { host: { name: "x.b.com", wildcard: true } },
      { host: { name: "b.com", wildcard: true } },
    ],
    ["any host last", { host: { name: "b.com", wildcard: true } }, { host: null }],
    [
      "an Exact path before a longer prefix",
      { path: { type: "Exact", value: "/a" } },
      { path: { type: "PathPrefix", value: "/a/b/c" } },
    ],
    [
      "the longer prefix first",
      { path: { type: "PathPrefix", value: "/match/prefix/" } },
      { path: { type: "PathPrefix", value: "/match/" } },
    ],
    ["a method match first", { method: "GET" }, { headers: [{ name: "a", value: "1" }] }],
    [
      "more headers first",
      {
        headers: [
          { name: "a", value: "1" },
          { name: "b", value: "2" },
        ],
      },
      { headers: [{ name: "a", value: "1" }], queryParams: [{ name: "q", value: "1" }] },
    ],
    ["more query params first", { queryParams: [{ name: "q", value: "1" }] }, {}],
    ["the older route first", { created: 1000, route: "z/z" }, { created: 2000, route: "a/a" }],
    ["a dated route before an undated one", { created: 1000 }, { created: Number.POSITIVE_INFINITY }],
    ["namespace/name order", { route: "a/b" }, { route: "b/a" }],
    ["rule order within a route", { ruleIndex: 0, matchIndex: 5 }, { ruleIndex: 1 }],
  ] as Array<[string, Partial<MatchEntry>, Partial<MatchEntry>]>)("%s", (_, a, b) => {
    expect(comparePrecedence(entry(a), entry(b))).toBeLessThan(0);
    expect(comparePrecedence(entry(b), entry(a))).toBeGreaterThan(0);
  });

  it("is a total order: antisymmetric, transitive, and 0 only for the same entry", () => {
    fc.assert(
      fc.property(arbEntry, arbEntry, arbEntry, (a, b, c) => {
        // A sum, not toBe(-x): for equal entries -Math.sign(0) is -0, which toBe (Object.is) tells from 0.
        expect(Math.sign(comparePrecedence(a, b)) + Math.sign(comparePrecedence(b, a))).toBe(0);
        expect(comparePrecedence(a, b) === 0).toBe(identity(a) === identity(b));
        if (comparePrecedence(a, b) <= 0 && comparePrecedence(b, c) <= 0)
          expect(comparePrecedence(a, c)).toBeLessThanOrEqual(0);
      }),
      { numRuns: 2000, examples: [[sameEntry, sameEntry, sameEntry]] },
    );
  });

  it("sorts the same whatever order the entries come in", () => {
    fc.assert(
      fc.property(
        fc
          .array(arbEntry, { maxLength: 30 })
          .chain((xs) =>
            fc.tuple(fc.constant(xs), fc.shuffledSubarray(xs, { minLength: xs.length, maxLength: xs.length })),
          ),
        ([xs, shuffled]) => {
          expect([...shuffled].sort(comparePrecedence).map(identity)).toEqual(
            [...xs].sort(comparePrecedence).map(identity),
          );
        },
      ),
    );
  });
});
