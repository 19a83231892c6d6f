import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { localCli } from "../../../shared/dev/local-cli.js";
// @ts-expect-error: plain JavaScript (it runs before any build), without declarations.
import { OUTPUTS, SOURCES, staleBecause } from "../../../shared/dev/start.mjs";
import { REPO } from "../../support/infra-manifests.js";

const touch = (root: string, file: string, at: number) => {
  mkdirSync(dirname(join(root, file)), { recursive: true });
  writeFileSync(join(root, file), "");
  utimesSync(join(root, file), at, at);
};

/** A folder's own time counts too (a deleted source changes it): every folder under `dir` set to `at`. */
const ageFolders = (dir: string, at: number) => {
  for (const e of readdirSync(dir, { withFileTypes: true }))
    if (e.isDirectory()) {
      ageFolders(join(dir, e.name), at);
      utimesSync(join(dir, e.name), at, at);
    }
};

describe("npm start: whether to build", () => {
  const tree = (outputsAt: number, sourcesAt: number) => {
    const root = mkdtempSync(join(tmpdir(), "servicelb-start-"));
    for (const f of OUTPUTS as string[]) touch(root, f, outputsAt);
    for (const s of SOURCES as string[]) touch(root, /\.\w+$/.test(s) ? s : join(s, "a.ts"), sourcesAt);
    ageFolders(root, sourcesAt);
    return root;
  };

  it("builds when there is no development build, or one of its outputs is missing", () => {
    const root = mkdtempSync(join(tmpdir(), "servicelb-start-"));
    expect(staleBecause(root)).toBe("no development build yet");
  });

  it("does not build when the build is newer than every source, and names what changed when not", () => {
    const root = tree(2000, 1000);
    expect(staleBecause(root)).toBeUndefined();
    touch(root, "shared/core/deep/new.ts", 3000);
    touch(root, "package-lock.json", 3000);
    expect(staleBecause(root)).toBe("changed since the last build: shared, package-lock.json");
    const again = tree(2000, 1000);
    utimesSync(join(again, "bench"), 3000, 3000);
    expect(staleBecause(again)).toBe("changed since the last build: bench");
  });
});

describe("npm start: the flags, checked before anything starts", () => {
  afterEach(() => vi.restoreAllMocks());
  const check = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
    let err = "";
    let out = "";
    vi.spyOn(process.stderr, "write").mockImplementation((s) => {
      err += String(s);
      return true;
    });
    vi.spyOn(process.stdout, "write").mockImplementation((s) => {
      out += String(s);
      return true;
    });
    const code = await localCli(["node", "npm start", ...args], {}, { checkOnly: true, env });
    vi.restoreAllMocks();
    return { code, err, out };
  };

  it("accepts good flags, answers --help, and refuses a bad value naming the flag", async () => {
    expect(await check(["--http-port", "9080", "--demo"])).toEqual({ code: 0, err: "", out: "" });
    const help = await check(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("--http-port <port>");
    expect(await check(["--http-port", "80a"])).toMatchObject({
      code: 2,
      err: "servicelb: --http-port: 80a is not a port\n",
    });
    expect(await check(["--nodes", "3"])).toEqual({ code: 0, err: "", out: "" });
    for (const bad of ["0", "10", "2.5"])
      expect(await check(["--nodes", bad])).toMatchObject({
        code: 2,
        err: `servicelb: --nodes: ${bad} is not a whole number from 1 to 9\n`,
      });
  });

  it("says that npm kept the flags given before --, with the command meant", async () => {
    // What `npm start --http-port 1 --demo` hands on: npm's own settings, and the "1".
    const r = await check(["1"], { npm_config_http_port: "true", npm_config_demo: "true" });
    expect(r).toEqual({
      code: 2,
      out: "",
      err: "servicelb: npm took --demo, --http-port for itself: the stack's flags go after --, as in npm start -- --demo --http-port 1\n",
    });
  });

  it.skipIf(staleBecause() !== undefined)("answers --help when the build is current, without building", () => {
    const r = spawnSync(process.execPath, [join(REPO, "shared/dev/start.mjs"), "--help"], { encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("--http-port <port>");
    // No time bound (a loaded machine takes seconds to load the CLI): not building is what keeps it quick.
    expect(r.stderr).not.toContain("building");
  });
});
