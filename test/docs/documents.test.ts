import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { anchors, section } from "../support/markdown.js";
import { REPO } from "../support/infra-manifests.js";

// The documents as a reader meets them: every link lands on a heading, every citation in the
// code lands on a heading of docs/, and the README stays an entry point.

const DOCS = ["README.md", ...readdirSync(join(REPO, "docs")).map((f) => `docs/${f}`)];
const read = (path: string) => readFileSync(join(REPO, path), "utf8");

/** Files under `dir`, recursively, whose name ends with one of `exts`. */
function files(dir: string, exts: readonly string[]): string[] {
  return readdirSync(join(REPO, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => exts.some((e) => f.endsWith(e)))
    .map((f) => join(dir, f));
}

const CODE = [
  ...["functions", "shared", "infra", "templates", "bin"].flatMap((d) => files(d, [".ts", ".js", ".yaml", ".liquid"])),
  "serverless.yml",
  ".ci/run",
];

describe("documents", () => {
  it("link to files that exist and headings they have", () => {
    const broken: string[] = [];
    for (const doc of DOCS) {
      for (const [, target] of read(doc).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [path, anchor] = target!.split("#") as [string, string | undefined];
        const file = path === "" ? doc : relative(REPO, join(REPO, dirname(doc), path));
        let exists = false;
        try {
          exists = statSync(join(REPO, file)).isFile();
        } catch {}
        if (!exists) broken.push(`${doc}: ${target} (no file ${file})`);
        else if (anchor !== undefined && !anchors(read(file)).has(anchor))
          broken.push(`${doc}: ${target} (no heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("hold every docs/…#anchor the code cites", () => {
    const cited = CODE.flatMap((file) =>
      [...read(file).matchAll(/docs\/([a-z-]+\.md)#([a-z0-9-]+)/g)].map((m) => ({ file, doc: m[1]!, anchor: m[2]! })),
    );
    expect(cited.filter((c) => c.doc === "design.md").length).toBeGreaterThan(10);
    const unresolved = cited.filter((c) => !anchors(read(`docs/${c.doc}`)).has(c.anchor));
    expect(unresolved).toEqual([]);
  });

  it("are what the code cites: no design section, invariant number or README section outside docs/", () => {
    const bare = CODE.flatMap((file) =>
      read(file)
        .split("\n")
        .filter((line) => /DESIGN §|DESIGN\.md|\b[Ii]nvariant [0-9]|README,? "|\(README\)/.test(line))
        .map((line) => `${file}: ${line.trim()}`),
    );
    expect(bare).toEqual([]);
  });

  it("keep the README an entry point of at most 250 lines", () => {
    expect(read("README.md").split("\n").length).toBeLessThanOrEqual(250);
  });

  it("state what is, in no changelog voice", () => {
    const voice = /no longer|as before|the former\b|our test server|\(measured; tested\)|\bstill works\b|\(tried\)/i;
    const found = DOCS.flatMap((doc) =>
      read(doc)
        .split("\n")
        .filter((line) => voice.test(line))
        .map((line) => `${doc}: ${line.trim()}`),
    );
    expect(found).toEqual([]);
  });

  it("map every folder of the code in docs/development.md", () => {
    const layout = section(read("docs/development.md"), "layout");
    // The folders git tracks: what a tool leaves in the checkout is no folder of the code.
    const tracked = execFileSync("git", ["ls-files"], { cwd: REPO, encoding: "utf8" }).split("\n");
    const folders = new Set(
      tracked.flatMap((f) => {
        const parts = f.split("/");
        if (parts.length < 2 || parts[0]!.startsWith(".")) return [];
        return parts[0] === "shared" && parts.length > 2 ? [`shared/${parts[1]}/`] : [`${parts[0]}/`];
      }),
    );
    expect([...folders].filter((f) => !layout.includes(`\`${f}\``))).toEqual([]);
  });
});
