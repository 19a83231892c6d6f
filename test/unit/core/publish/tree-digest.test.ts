import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { loadTemplates, packageRoot } from "../../../../shared/adapters/templates.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { ChunkedTreeDigest, SuccessiveTreeDigest, treeDigest } from "../../../../shared/core/publish/tree-digest.js";
import { list, service, slice } from "../../../support/fixtures.js";

/** The definition as docs/design.md states it, line by line: a cut before every line but the first that starts `backend `. */
function byDefinition(config: string): string {
  const pieces: string[] = [];
  const lines = config.split(/(?<=\n)/);
  for (const [i, line] of lines.entries()) {
    if (line === "") continue;
    if (i > 0 && line.startsWith("backend ")) pieces.push(line);
    else if (pieces.length === 0) pieces.push(line);
    else pieces[pieces.length - 1] += line;
  }
  const root = createHash("sha256").update("servicelb tree1\n");
  for (const p of pieces) root.update(createHash("sha256").update(p, "utf8").digest());
  return root.digest("hex");
}

const line = fc.oneof(
  fc.constantFrom("backend a\n", "backend b-80\n", "  server s1 10.0.0.1:80\n", "frontend http\n", "\n"),
  fc.constantFrom("backendx\n", " backend c\n", "# backend d\n", "use_backend a\n", "backend\n"),
  fc.string({ maxLength: 12 }).map((s) => `${s.replace(/\n/g, "")}\n`),
);
const config = fc.array(line, { maxLength: 40 }).map((ls) => ls.join(""));

describe("the tree digest (tree1)", () => {
  it("is the digest the definition gives", () => {
    fc.assert(
      fc.property(config, (text) => {
        expect(treeDigest(text)).toBe(byDefinition(text));
      }),
      { numRuns: 300 },
    );
  });

  it("is the value the shell command of docs/design.md printed for these bytes when this test was written", () => {
    const text = "global\n  daemon\nfrontend http\n  use_backend a\nbackend a\n  server s 10.0.0.1:80\nbackend b\n";
    expect(treeDigest(text)).toBe("a79caa6ba958bd19dc5b576e2e186ae91dc316b67242d1dbff17fdbdf26b4204");
  });

  it("is what the shell command of docs/design.md prints for a rendered config", () => {
    const doc = readFileSync(join(packageRoot(), "docs", "design.md"), "utf8");
    const script = /```sh\n(d=\$\(mktemp -d\)[\s\S]*?)```/.exec(doc)?.[1];
    expect(script, "the tree1 command of docs/design.md").toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), "tree1-"));
    try {
      const services = Array.from({ length: 40 }, (_, i) =>
        service(`svc-${i}`, [{ name: "http", port: 80, targetPort: 8080 }]),
      );
      const slices = services.map((_, i) => slice(`svc-${i}`, [{ name: "http", port: 8080 }], [`10.0.0.${i + 1}`]));
      const config = renderSnapshot(
        snapshotFromDocuments([list([...services, ...slices])]),
        parseRenderOptions({}),
        new Renderer(loadTemplates()),
      ).bytes;
      writeFileSync(join(dir, "haproxy.cfg"), config);
      // The script's own temp dir goes under this test's, which is removed.
      const printed = execFileSync("bash", ["-euo", "pipefail", "-c", script!], {
        cwd: dir,
        encoding: "utf8",
        env: { ...process.env, TMPDIR: dir },
      });
      expect(printed.slice(0, 64)).toBe(treeDigest(config));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("has no empty first piece for a config that starts with a backend, and none at all for nothing", () => {
    const root = (pieces: string[]) =>
      createHash("sha256")
        .update(
          Buffer.concat([
            Buffer.from("servicelb tree1\n"),
            ...pieces.map((p) => createHash("sha256").update(p).digest()),
          ]),
        )
        .digest("hex");
    expect(treeDigest("backend a\nbackend b\n")).toBe(root(["backend a\n", "backend b\n"]));
    expect(treeDigest("")).toBe(root([]));
    expect(treeDigest("backend a\n")).not.toBe(treeDigest("backend a\n\n"));
  });

  it("gives the same digest from chunks, whatever the chunks and whatever changed since the last config", () => {
    // Each pass keeps some chunks of the last one as the very same memory, as a warm render does.
    const pass = fc.record({ text: config, cuts: fc.array(fc.nat(), { maxLength: 8 }), keep: fc.array(fc.boolean()) });
    fc.assert(
      fc.property(fc.array(pass, { minLength: 1, maxLength: 6 }), fc.boolean(), (passes, atLines) => {
        const digest = new ChunkedTreeDigest();
        let last: Buffer[] = [];
        for (const p of passes) {
          const bytes = Buffer.from(p.text, "utf8");
          const ends = new Set<number>();
          for (const c of p.cuts) {
            let at = bytes.length === 0 ? 0 : c % bytes.length;
            // Most renders cut at line ends; mid-line cuts take the joined path.
            if (atLines) while (at < bytes.length && at > 0 && bytes[at - 1] !== 0x0a) at++;
            ends.add(at);
          }
          const points = [0, ...[...ends].sort((a, b) => a - b), bytes.length];
          const chunks: Buffer[] = [];
          for (let i = 0; i + 1 < points.length; i++) {
            const piece = bytes.subarray(points[i], points[i + 1]);
            const same = last.find((c, j) => p.keep[j] && c.equals(piece));
            chunks.push(same ?? Buffer.from(piece));
          }
          expect(digest.digest(chunks)).toBe(treeDigest(bytes));
          last = chunks;
        }
      }),
      { numRuns: 300 },
    );
  });

  it("tells other ranges of the same slab apart", () => {
    const digest = new ChunkedTreeDigest();
    const slab = Buffer.from(
      "backend a\n  server s 10.0.0.1:80\nbackend b\n  server s 10.0.0.2:80\nbackend c\n  server s 10.0.0.3:80\n",
    );
    const b = slab.indexOf("backend b");
    const c = slab.indexOf("backend c");
    const whole = [slab.subarray(0, b), slab.subarray(b)];
    expect(digest.digest(whole)).toBe(treeDigest(slab));
    // The same slab cut elsewhere, and a range of it that starts where an earlier chunk did.
    const recut = [slab.subarray(0, c), slab.subarray(c)];
    expect(digest.digest(recut)).toBe(treeDigest(slab));
    const dropped = [slab.subarray(0, b), slab.subarray(c)];
    expect(digest.digest(dropped)).toBe(treeDigest(Buffer.concat(dropped)));
    const shorter = [slab.subarray(0, b), slab.subarray(b, c)];
    expect(digest.digest(shorter)).toBe(treeDigest(Buffer.concat(shorter)));
  });
});

describe("successive tree digests (an agent's pulls)", () => {
  it("give each config's tree digest, whatever changed since the one before", () => {
    const edit = fc.record({ at: fc.nat(), drop: fc.nat({ max: 40 }), insert: config });
    fc.assert(
      fc.property(config, fc.array(edit, { minLength: 1, maxLength: 8 }), (first, edits) => {
        const digest = new SuccessiveTreeDigest();
        let text = first;
        expect(digest.digest(Buffer.from(text))).toBe(treeDigest(text));
        for (const e of edits) {
          const at = text.length === 0 ? 0 : e.at % (text.length + 1);
          text = text.slice(0, at) + e.insert.slice(0, 60) + text.slice(at + e.drop);
          expect(digest.digest(Buffer.from(text))).toBe(treeDigest(text));
        }
      }),
      { numRuns: 500 },
    );
  });

  it("gives it for a config that moved one server of many backends, and back", () => {
    const backends = Array.from({ length: 300 }, (_, i) => `backend b${i}\n  server s 10.0.${i % 250}.1:80\n`);
    const a = `global\n${backends.join("")}#> maps/x.map\nhost b0\n`;
    const b = a.replace("10.0.7.1:80", "10.0.7.123:8080");
    const digest = new SuccessiveTreeDigest();
    for (const text of [a, b, a, a, b.replace("backend b299", "backend c299")])
      expect(digest.digest(Buffer.from(text))).toBe(treeDigest(text));
  });
});
