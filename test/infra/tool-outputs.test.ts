import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "../support/infra-manifests.js";

// What the documented commands leave in a checkout (`npx serverless package`: .serverless/;
// `render --out rendered`: rendered/; `npm start`: .servicelb-local/) is neither tracked by git
// nor linted, so `npm test` passes after following the docs.

const OUTPUTS = [".serverless", "rendered", ".servicelb-local"];

describe("tool outputs in the checkout", () => {
  it("are ignored by git", () => {
    const paths = OUTPUTS.map((d) => `${d}/configuration-template-update.json`);
    const r = spawnSync("git", ["check-ignore", ...paths], { cwd: REPO, encoding: "utf8" });
    expect(r.stdout.trim().split("\n")).toEqual(paths);
  });

  it("are not linted: Biome passes with a file there it would refuse", () => {
    const made = OUTPUTS.map((d) => join(REPO, d, `lint-probe-${process.pid}.json`));
    const newDirs = OUTPUTS.map((d) => join(REPO, d)).filter((d) => !existsSync(d));
    try {
      for (const file of made) {
        mkdirSync(join(file, ".."), { recursive: true });
        writeFileSync(file, '{"unformatted":1,\n      "json": [ 1,2 ]}');
      }
      const r = spawnSync(join(REPO, "node_modules", ".bin", "biome"), ["check", "."], { cwd: REPO, encoding: "utf8" });
      expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
      // The probe is one Biome refuses where it does look.
      const probe = spawnSync(join(REPO, "node_modules", ".bin", "biome"), ["format", "--stdin-file-path=x.json"], {
        cwd: REPO,
        input: '{"unformatted":1,\n      "json": [ 1,2 ]}',
        encoding: "utf8",
      });
      expect(probe.stdout).not.toBe('{"unformatted":1,\n      "json": [ 1,2 ]}');
    } finally {
      for (const file of made) rmSync(file, { force: true });
      for (const dir of newDirs) rmSync(dir, { recursive: true, force: true });
    }
  });
});
