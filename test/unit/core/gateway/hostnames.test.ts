import { describe, expect, it } from "vitest";
import { effectiveHostnames, hostMatches } from "../../../../shared/core/gateway/hostnames.js";

const text = (hosts: ReturnType<typeof effectiveHostnames>) =>
  hosts === null ? null : hosts.map((h) => `${h.wildcard ? "*." : ""}${h.name}`);

describe("listener ↔ route hostname intersection (conformance HTTPRouteHostnameIntersection)", () => {
  it("keeps the route's names that the listener's exact name allows", () => {
    expect(
      text(
        effectiveHostnames("very.specific.com", ["non.matching.com", "*.nonmatchingwildcard.io", "very.specific.com"]),
      ),
    ).toEqual(["very.specific.com"]);
  });

  it("a route wildcard narrows to the listener's exact name", () => {
    expect(text(effectiveHostnames("very.specific.com", ["non.matching.com", "*.specific.com"]))).toEqual([
      "very.specific.com",
    ]);
  });

  it("a listener wildcard takes names under it at any depth, never the apex", () => {
    expect(
      text(
        effectiveHostnames("*.wildcard.io", [
          "non.matching.com",
          "wildcard.io",
          "foo.wildcard.io",
          "bar.wildcard.io",
          "foo.bar.wildcard.io",
        ]),
      ),
    ).toEqual(["foo.wildcard.io", "bar.wildcard.io", "foo.bar.wildcard.io"]);
  });

  it("two wildcards intersect to the narrower one", () => {
    expect(text(effectiveHostnames("*.anotherwildcard.io", ["*.anotherwildcard.io"]))).toEqual([
      "*.anotherwildcard.io",
    ]);
    expect(text(effectiveHostnames("*.io", ["*.a.io"]))).toEqual(["*.a.io"]);
    expect(text(effectiveHostnames("*.a.io", ["*.io"]))).toEqual(["*.a.io"]);
  });

  it("shares nothing: an empty list (the route does not attach)", () => {
    expect(effectiveHostnames("*.wildcard.io", ["specific.but.wrong.com", "wildcard.io"])).toEqual([]);
  });

  it("no name on either side: any host; on one side: that side's names", () => {
    expect(effectiveHostnames(null, [])).toBeNull();
    expect(text(effectiveHostnames(null, ["first.com", "sub.first.com"]))).toEqual(["first.com", "sub.first.com"]);
    expect(text(effectiveHostnames("*.example.com", []))).toEqual(["*.example.com"]);
  });

  it("matches requests as the spec says: a wildcard is a suffix of whole labels", () => {
    const wild = { name: "example.com", wildcard: true };
    expect(hostMatches(wild, "a.example.com")).toBe(true);
    expect(hostMatches(wild, "a.b.example.com")).toBe(true);
    expect(hostMatches(wild, "example.com")).toBe(false);
    expect(hostMatches(wild, "badexample.com")).toBe(false);
  });
});
