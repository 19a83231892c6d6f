import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../../shared/adapters/log.js";
import { ConfigFiles } from "../../../shared/agent/config-files.js";
import { renderPatternSection } from "../../../shared/core/haproxy-config/pattern-files.js";

// The files HAProxy reads on the node: haproxy.cfg and the pattern files the config carries.

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function node() {
  const dir = mkdtempSync(join(tmpdir(), "config-files-"));
  dirs.push(dir);
  const configPath = join(dir, "haproxy.cfg");
  return { dir, configPath, files: new ConfigFiles(configPath, createLogger("config-files-test", "silent")) };
}

const config = (files: Array<[string, string[]]>) =>
  `global\n    master-worker\n${renderPatternSection(files.map(([path, entries]) => ({ path, entries })))}`;

describe("ConfigFiles", () => {
  it("writes the pattern files beside haproxy.cfg and removes those a later config no longer names, not others", async () => {
    const n = node();
    const first = config([
      ["patterns/default.web.allow", ["10.0.0.0/8"]],
      ["patterns/shop.api.deny", ["fd00::/8", "192.0.2.1"]],
    ]);
    await n.files.writeConfig(first);
    expect(readFileSync(n.configPath, "utf8")).toBe(first);
    expect(readFileSync(join(n.dir, "patterns/shop.api.deny"), "utf8")).toBe("fd00::/8\n192.0.2.1\n");
    writeFileSync(join(n.dir, "patterns", "README"), "not ours");

    const second = config([["patterns/default.web.allow", ["10.0.0.0/8", "172.16.0.0/12"]]]);
    await n.files.writeConfig(second);
    expect(readFileSync(join(n.dir, "patterns/default.web.allow"), "utf8")).toBe("10.0.0.0/8\n172.16.0.0/12\n");
    expect(readdirSync(join(n.dir, "patterns")).sort()).toEqual(["README", "default.web.allow"]);
  });

  it("refuses a config whose pattern section does not parse, and writes nothing", async () => {
    const n = node();
    await expect(n.files.writeConfig(`${config([["patterns/a.b.allow", ["10.0.0.1"]]])}#| x\n`)).rejects.toThrow(
      /not an address or CIDR/,
    );
    expect(existsSync(n.configPath)).toBe(false);
    expect(existsSync(join(n.dir, "patterns"))).toBe(false);
  });

  it("before HAProxy starts on the config on disk, puts back a pattern file that went missing", async () => {
    const n = node();
    const text = config([["patterns/default.web.allow", ["10.0.0.0/8"]]]);
    await n.files.writeConfig(text);
    rmSync(join(n.dir, "patterns/default.web.allow"));
    await n.files.ensurePatternFiles(text);
    expect(readFileSync(join(n.dir, "patterns/default.web.allow"), "utf8")).toBe("10.0.0.0/8\n");
  });
});
