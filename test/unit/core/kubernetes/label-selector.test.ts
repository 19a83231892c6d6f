import { describe, expect, it } from "vitest";
import {
  formatLabelSelector,
  matchesSelector,
  parseLabelSelector,
} from "../../../../shared/core/kubernetes/label-selector.js";

describe("label selectors", () => {
  it("parses the equality forms kubectl -l takes and writes them back", () => {
    const s = parseLabelSelector("app=web, tier==front,env!=dev,expose,!internal");
    expect(s).toEqual([
      { op: "eq", key: "app", value: "web" },
      { op: "eq", key: "tier", value: "front" },
      { op: "neq", key: "env", value: "dev" },
      { op: "exists", key: "expose" },
      { op: "absent", key: "internal" },
    ]);
    expect(formatLabelSelector(s)).toBe("app=web,tier=front,env!=dev,expose,!internal");
  });

  it("matches all terms (AND); != also matches a missing label", () => {
    const s = parseLabelSelector("app=web,env!=dev,!internal");
    expect(matchesSelector(s, { app: "web" })).toBe(true);
    expect(matchesSelector(s, { app: "web", env: "prod" })).toBe(true);
    expect(matchesSelector(s, { app: "web", env: "dev" })).toBe(false);
    expect(matchesSelector(s, { app: "web", internal: "" })).toBe(false);
    expect(matchesSelector(s, {})).toBe(false);
    expect(matchesSelector(parseLabelSelector(""), {})).toBe(true);
  });

  it("does not take an inherited property for a label", () => {
    expect(matchesSelector(parseLabelSelector("toString"), {})).toBe(false);
  });

  it.each(["app in (web)", "!app=web", "app=we b", "-app=x", "app=value_"])(
    "refuses %j rather than half-supporting it",
    (text) => {
      expect(() => parseLabelSelector(text)).toThrow(/label selector/);
    },
  );
});
