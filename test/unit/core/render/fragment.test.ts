import fc from "fast-check";
import { Liquid } from "liquidjs";
import { describe, expect, it } from "vitest";
import { compileFragment, plainFields } from "../../../../shared/core/render/fragment.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";

const liquid = new Liquid({ templates: {} });
const scalar = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.constant(""),
);

describe("compiled fragments", () => {
  it("recognises plain fragments and refuses anything else", () => {
    expect(plainFields("a {{ x.f }}{% if x.g %}b{% else %}c{% endif %}", "x")).toEqual(["f", "g"]);
    expect(plainFields("{{ x.f | upcase }}", "x")).toBeNull();
    expect(plainFields("{% if x.f == 'a' %}{% endif %}", "x")).toBeNull();
    expect(plainFields("{% for s in x.f %}{% endfor %}", "x")).toBeNull();
    expect(plainFields("{{ y.f }}", "x")).toBeNull();
  });

  it.each(Object.entries(loadTemplates()).filter(([k]) => k !== "main"))(
    "the built-in %s fragment is plain (fast path)",
    (_k, source) => {
      const variable = /\{\{\s*(\w+)\./.exec(source)![1]!;
      expect(plainFields(source, variable)).not.toBeNull();
    },
  );

  it("renders exactly what liquidjs renders, for any values", () => {
    const source =
      "a{{ v.x }}b{% if v.y %}[{{ v.y }}]{% else %}none{% endif %}{% unless v.z %}!{% endunless %}{{ v.z }}\n";
    const template = liquid.parse(source);
    const fast = compileFragment(liquid, source, "v");
    fc.assert(
      fc.property(fc.record({ x: scalar, y: scalar, z: scalar }), (v) => {
        expect(fast(v)).toBe(liquid.renderSync(template, { v }));
      }),
      { numRuns: 500 },
    );
  });

  it("falls back to liquidjs for non-plain fragments; values holding the sentinel characters render verbatim", () => {
    const fast = compileFragment<{ x: unknown }>(liquid, "{{ v.x | upcase }}", "v");
    expect(fast({ x: "abc" })).toBe("ABC");
    const plain = compileFragment<{ x: unknown }>(liquid, "<{{ v.x }}>", "v");
    expect(plain({ x: "\u00010\u0002" })).toBe("<\u00010\u0002>");
    expect(plain({ x: ["a", "b"] })).toBe(liquid.parseAndRenderSync("<{{ v.x }}>", { v: { x: ["a", "b"] } }));
  });
});
