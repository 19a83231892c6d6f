import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { unifiedDiff } from "../../../../shared/core/publish/line-diff.js";

const dir = mkdtempSync(join(tmpdir(), "servicelb-diff-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** GNU diff's own output without its timestamped header, for texts where the edit script is unique. */
function gnuDiff(a: string, b: string): string {
  writeFileSync(join(dir, "a"), a);
  writeFileSync(join(dir, "b"), b);
  const r = spawnSync("diff", ["-u", "--label", "a", "--label", "b", join(dir, "a"), join(dir, "b")], {
    encoding: "utf8",
  });
  return r.stdout;
}

/** Applies the diff with patch(1); returns the patched text. */
function applyPatch(a: string, diff: string): string {
  writeFileSync(join(dir, "p"), a);
  const r = spawnSync("patch", ["--quiet", "--force", join(dir, "p")], { input: diff, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`patch failed: ${r.stdout}${r.stderr}`);
  return readFileSync(join(dir, "p"), "utf8");
}

const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}\n`).join("");

describe("unifiedDiff", () => {
  it("is empty for equal texts", () => {
    expect(unifiedDiff("a\n", "a\n", { fromLabel: "a", toLabel: "b" })).toBe("");
  });

  it("matches GNU diff -u on distinct lines: hunks, context, ranges and a missing final newline", () => {
    const a = lines(30);
    const cases = [
      a.replace("line 2\n", "line two\n"),
      a.replace("line 2\n", "").replace("line 25\n", "line 25\nextra\n"),
      a.replace("line 10\n", "ten\n").replace("line 14\n", "fourteen\n"),
      `${a}tail`,
      "",
      `first\n${a}`,
      a.replace(/line 30\n$/, "line 30"),
    ];
    for (const b of cases) {
      expect(unifiedDiff(a, b, { fromLabel: "a", toLabel: "b" })).toBe(gnuDiff(a, b));
      expect(unifiedDiff(b, a, { fromLabel: "a", toLabel: "b" })).toBe(gnuDiff(b, a));
    }
  });

  it("always gives a patch that turns one text into the other", () => {
    const text = fc
      .array(fc.constantFrom("a\n", "b\n", "c\n", "backend x\n", "  server s1\n", "\n"), { maxLength: 40 })
      .map((l) => l.join(""));
    fc.assert(
      fc.property(text, text, fc.integer({ min: 0, max: 4 }), (a, b, context) => {
        const diff = unifiedDiff(a, b, { fromLabel: "a", toLabel: "b", context });
        if (a === b) return diff === "";
        return applyPatch(a, diff) === b;
      }),
      { numRuns: 150 },
    );
  });

  it("falls back to remove-and-add beyond maxEdits, still a correct patch", () => {
    const a = lines(50);
    const b = lines(50).replace(/line (\d+)/g, "row $1");
    const diff = unifiedDiff(a, b, { fromLabel: "a", toLabel: "b", maxEdits: 10 });
    expect(applyPatch(a, diff)).toBe(b);
  });
});
