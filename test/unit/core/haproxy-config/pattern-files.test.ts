import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  diffPatternFiles,
  PATTERN_SECTION,
  patternFileText,
  renderPatternSection,
  splitConfig,
} from "../../../../shared/core/haproxy-config/pattern-files.js";

// The pattern files travel at the end of the published config: what the renderer appends the
// agent must split back exactly, and refuse anything it did not write.

const HEAD = "global\n    default-path config\n\nbackend b\n    acl src_allowed src -f patterns/shop.api.allow\n";

describe("pattern files in the published config", () => {
  it("round trip: the head unchanged, the files by path, sorted", () => {
    const text =
      HEAD +
      renderPatternSection([
        { path: "patterns/shop.api.deny", entries: ["10.66.0.0/16"] },
        { path: "patterns/shop.api.allow", entries: ["10.0.0.0/8", "fd00::/8"] },
      ]);
    expect(text.slice(HEAD.length)).toBe(
      `${PATTERN_SECTION}\n#> patterns/shop.api.allow\n#| 10.0.0.0/8\n#| fd00::/8\n#> patterns/shop.api.deny\n#| 10.66.0.0/16\n`,
    );
    const split = splitConfig(text);
    expect(split).toEqual({
      head: HEAD,
      files: new Map([
        ["patterns/shop.api.allow", ["10.0.0.0/8", "fd00::/8"]],
        ["patterns/shop.api.deny", ["10.66.0.0/16"]],
      ]),
    });
    expect(patternFileText(["10.0.0.0/8", "fd00::/8"])).toBe("10.0.0.0/8\nfd00::/8\n");
  });

  it("takes a config's files from one split before only when its section is the same bytes", () => {
    const section = renderPatternSection([{ path: "patterns/shop.api.allow", entries: ["10.0.0.0/8"] }]);
    const text = HEAD + section;
    const known = { text, ...(splitConfig(text) as { head: string; files: ReadonlyMap<string, readonly string[]> }) };
    const moved = `${HEAD.replace("backend b", "backend c")}${section}`;
    expect(splitConfig(moved, known)).toEqual({ head: moved.slice(0, -section.length), files: known.files });
    expect((splitConfig(moved, known) as { files: unknown }).files).toBe(known.files);
    // A line of the section changed, to as many bytes: read again.
    const other = `${HEAD}${section.replace("10.0.0.0/8", "10.0.0.0/9")}`;
    expect(splitConfig(other, known)).toEqual({
      head: HEAD,
      files: new Map([["patterns/shop.api.allow", ["10.0.0.0/9"]]]),
    });
    // A line of the section changed: checked again, and refused when it is no address.
    const bad = `${HEAD}${section.replace("10.0.0.0/8", "10.0.0.0/88")}`;
    expect(splitConfig(bad, known)).toHaveProperty("error");
    expect(splitConfig(`${HEAD}${section}${section.slice(PATTERN_SECTION.length + 1)}`, known)).toHaveProperty("error");
  });

  it("splits alike with or without a config split before (property)", () => {
    // Each line has a twin of its length: two configs of one shape have sections of one size.
    const twins: Array<[string, string]> = [
      ["#> patterns/a.b.allow", "#> patterns/a.c.allow"],
      ["#| 10.0.0.0/8", "#| 10.0.0.0/9"],
      ["#| 10.0.0.1", "#| 10.0.0.x"],
      ["    maxconn 1", "#| 10.0.0.0/1"],
      [PATTERN_SECTION, PATTERN_SECTION],
    ];
    const shape = fc.tuple(
      fc.constantFrom("", HEAD, `${HEAD}\n`),
      fc.boolean(),
      fc.array(fc.nat(twins.length - 1), { maxLength: 6 }),
    );
    const configOf = ([head, marked, lines]: [string, boolean, number[]], twin: boolean[]) =>
      `${head}${marked ? `${PATTERN_SECTION}\n` : ""}${lines.map((l, i) => `${twins[l]![twin[i] ? 1 : 0]}\n`).join("")}`;
    const twinBits = fc.array(fc.boolean(), { minLength: 6, maxLength: 6 });
    fc.assert(
      fc.property(shape, shape, twinBits, twinBits, (a, b, bitsA, bitsB) => {
        const before = configOf(a, bitsA);
        const split = splitConfig(before);
        if ("error" in split) return;
        const known = { text: before, ...split };
        // The same shape with other twins, under another head; and a config of another shape.
        for (const text of [configOf([b[0], a[1], a[2]], bitsB), configOf(b, bitsB)])
          expect(splitConfig(text, known)).toEqual(splitConfig(text));
      }),
      { numRuns: 1000 },
    );
  });

  it("a config without lists is all head, and gains no section", () => {
    expect(renderPatternSection([])).toBe("");
    expect(splitConfig(HEAD)).toEqual({ head: HEAD, files: new Map() });
  });

  it.each([
    ["no final newline", `${PATTERN_SECTION}\n#> patterns/a.b.allow\n#| 10.0.0.1`, "does not end with a newline"],
    ["a line before any file", `${PATTERN_SECTION}\n#| 10.0.0.1\n`, 'line 1: "#| 10.0.0.1" is neither'],
    ["a path twice", `${PATTERN_SECTION}\n#> patterns/a.b.allow\n#> patterns/a.b.allow\n`, "appears twice"],
    ["a path outside patterns/", `${PATTERN_SECTION}\n#> /etc/haproxy/x\n`, "is not a pattern file path"],
    ["a dotted traversal", `${PATTERN_SECTION}\n#> patterns/...allow\n`, "is not a pattern file path"],
    ["a kind that is neither list", `${PATTERN_SECTION}\n#> patterns/a.b.map\n`, "is not a pattern file path"],
    [
      "a pattern with a flag",
      `${PATTERN_SECTION}\n#> patterns/a.b.allow\n#| -m 10.0.0.1\n`,
      "is not an address or CIDR",
    ],
    [
      "an address not in canonical form",
      `${PATTERN_SECTION}\n#> patterns/a.b.allow\n#| FD00::1\n`,
      "is not an address",
    ],
    ["a command smuggled", `${PATTERN_SECTION}\n#> patterns/a.b.allow\n#| 10.0.0.1;clear acl x\n`, "is not an address"],
    [
      "a line twice in a file",
      `${PATTERN_SECTION}\n#> patterns/a.b.allow\n#| 10.0.0.1\n#| 10.0.0.1\n`,
      "appears twice",
    ],
    ["a directive after the section", `${PATTERN_SECTION}\n#> patterns/a.b.allow\n    maxconn 1\n`, "is neither"],
  ])("refused: %s", (_name, section, error) => {
    const split = splitConfig(HEAD + section);
    expect(split).toHaveProperty("error");
    expect((split as { error: string }).error).toContain(error);
  });

  it("carries route maps beside the lists, each line checked against its map's grammar", () => {
    const files = [
      { path: "maps/http.paths.map", entries: ["/web/ default_web_80", "/shop/cart/ spare_2|2"] },
      { path: "maps/http.hosts.map", entries: [] },
      { path: "patterns/shop.api.allow", entries: ["10.0.0.0/8"] },
    ];
    const split = splitConfig(HEAD + renderPatternSection(files));
    expect(split).toEqual({
      head: HEAD,
      files: new Map([
        ["maps/http.hosts.map", []],
        ["maps/http.paths.map", ["/web/ default_web_80", "/shop/cart/ spare_2|2"]],
        ["patterns/shop.api.allow", ["10.0.0.0/8"]],
      ]),
    });
    const bad = splitConfig(`${HEAD}${PATTERN_SECTION}\n#> maps/http.paths.map\n#| /web/ %[req.hdr(x)]\n`);
    expect(bad).toEqual({
      error: 'pattern section line 2: "/web/ %[req.hdr(x)]": value "%[req.hdr(x)]" is not a backend name',
    });
    expect(splitConfig(`${HEAD}${PATTERN_SECTION}\n#> maps/other.map\n`)).toEqual({
      error: 'pattern section line 1: "maps/other.map" is not a pattern file path',
    });
  });

  it("refuses a file longer than the bound", () => {
    const entries = Array.from({ length: 10_001 }, (_, i) => `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    const split = splitConfig(HEAD + renderPatternSection([{ path: "patterns/a.b.allow", entries }]));
    expect(split).toEqual({ error: "pattern section line 10002: more than 10000 lines in patterns/a.b.allow" });
  });

  it("diff: changed files only; a file added or removed is a reload", () => {
    const a = new Map([
      ["patterns/a.b.allow", ["10.0.0.1"]],
      ["patterns/a.c.allow", ["10.0.0.2"]],
    ]);
    expect(diffPatternFiles(a, new Map([...a, ["patterns/a.c.allow", ["10.0.0.3"]]]))).toEqual({
      kind: "files",
      changed: [{ path: "patterns/a.c.allow", entries: ["10.0.0.3"] }],
    });
    expect(diffPatternFiles(a, a)).toEqual({ kind: "files", changed: [] });
    expect(diffPatternFiles(a, new Map([...a, ["patterns/a.d.deny", ["10.0.0.3"]]]))).toEqual({
      kind: "reload",
      reason: "pattern file patterns/a.d.deny added",
    });
    expect(diffPatternFiles(a, new Map([["patterns/a.b.allow", ["10.0.0.1"]]]))).toEqual({
      kind: "reload",
      reason: "pattern file patterns/a.c.allow removed",
    });
  });
});
