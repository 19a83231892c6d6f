import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { section } from "../support/markdown.js";
import { requireHaproxy } from "../support/haproxy.js";

// `servicelb render --out DIR`: the dry run's output as the agent puts it on a node, which HAProxy
// loads; and the README's render commands, run as written.

const root = join(import.meta.dirname, "..", "..");
const bin = join(root, "bin", "servicelb.js");
const settingsSnapshot = join(root, "test", "golden", "settings.yaml");
const env = { PATH: process.env.PATH ?? "", HOME: "/nonexistent-home", LOG_LEVEL: "silent" };

function cli(args: string[], cwd: string) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd, encoding: "utf8", env });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `haproxy -c` as a user runs it; the stats password is the node's, never in the config. */
function haproxyCheck(config: string, cwd: string) {
  const r = spawnSync("haproxy", ["-c", "-f", config], {
    cwd,
    encoding: "utf8",
    env: { ...env, SERVICELB_STATS_PASSWORD: "secret" },
  });
  return { code: r.status, output: `${r.stdout}${r.stderr}` };
}

/** Every file under `dir`, by its path relative to it. */
function tree(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

let work: string;
beforeAll(() => {
  requireHaproxy();
  work = mkdtempSync(join(tmpdir(), "servicelb-render-out-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the README's render commands", () => {
  it("run as written, and HAProxy loads what they write", () => {
    const block = /```sh\n([\s\S]*?)```/.exec(
      section(readFileSync(join(root, "README.md"), "utf8"), "render-a-config"),
    );
    const commands = block![1]!
      .split("\n")
      .map((line) => line.replace(/\s+#.*$/, "").trim())
      .filter((line) => line !== "");
    expect(commands.some((c) => c.includes("--out"))).toBe(true);
    const cwd = mkdtempSync(join(work, "readme-"));
    symlinkSync(join(root, "examples"), join(cwd, "examples"));
    for (const command of commands) {
      const args = command.split(/\s+/);
      let r: { code: number | null };
      if (command.startsWith("npx servicelb ")) r = cli(args.slice(2), cwd);
      else if (command.startsWith("haproxy -c -f ")) r = haproxyCheck(args[3]!, cwd);
      else throw new Error(`not a render or a check: ${command}`);
      expect(r.code, `${command}\n${JSON.stringify(r)}`).toBe(0);
    }
    expect(commands.at(-1)).toMatch(/^haproxy -c -f /);
  });
});

describe("render --out", () => {
  it("writes haproxy.cfg with its maps and pattern files, which HAProxy loads", () => {
    const out = join(work, "settings");
    const r = cli(["render", "--snapshot", settingsSnapshot, "--out", out], work);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("");
    const files = tree(out);
    expect(files).toContain("haproxy.cfg");
    expect(files.some((f) => f.startsWith("maps/"))).toBe(true);
    expect(files.some((f) => f.startsWith("patterns/"))).toBe(true);
    // The same config the CLI prints, and each file the "#>" block of the same name.
    const printed = cli(["render", "--snapshot", settingsSnapshot], work).stdout;
    expect(readFileSync(join(out, "haproxy.cfg"), "utf8")).toBe(printed);
    for (const f of files.filter((f) => f !== "haproxy.cfg")) {
      const block = new RegExp(`^#> ${f.replace(/\./g, "\\.")}\\n((?:#\\| .*\\n)*)`, "m").exec(printed);
      expect(readFileSync(join(out, f), "utf8"), f).toBe(block![1]!.replace(/^#\| /gm, ""));
    }
    const check = haproxyCheck(join(out, "haproxy.cfg"), work);
    expect(check.code, check.output).toBe(0);
  });

  it("replaces a previous render, without the files the new config no longer names", () => {
    const out = join(work, "again");
    expect(cli(["render", "--snapshot", settingsSnapshot, "--out", out], work).code).toBe(0);
    const stale = join(out, "patterns", "gone.svc.allow");
    writeFileSync(stale, "10.0.0.1\n");
    const r = cli(["render", "--snapshot", join(root, "examples", "cluster.yaml"), "--out", out], work);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(stale)).toBe(false);
    expect(tree(out).filter((f) => f.startsWith("patterns/"))).toEqual([]);
  });

  it("refuses a directory that holds anything a render does not write, and leaves it as it was", () => {
    const out = join(work, "mine");
    mkdirSync(join(out, "patterns"), { recursive: true });
    writeFileSync(join(out, "notes.txt"), "mine");
    writeFileSync(join(out, "patterns", "keep.me"), "mine");
    const r = cli(["render", "--snapshot", settingsSnapshot, "--out", out], work);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      `servicelb: --out ${out}: the directory is not empty and is not a previous render (it holds notes.txt, patterns/keep.me); give a new or empty directory, or one a render wrote\n`,
    );
    expect(tree(out)).toEqual(["notes.txt", "patterns/keep.me"]);
  });

  it("names the flag when DIR is a file", () => {
    const file = join(work, "a-file");
    writeFileSync(file, "");
    const r = cli(["render", "--snapshot", settingsSnapshot, "--out", file], work);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`servicelb: --out ${file}: not a directory\n`);
  });
});
