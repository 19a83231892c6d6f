import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");

/** The reconcile bundle refuses to load without a store: an error thrown from inside the bundle. */
function loadReconcile(flags: string[]): string {
  const r = spawnSync(
    process.execPath,
    [
      ...flags,
      "--input-type=module",
      "-e",
      `await import(${JSON.stringify(join(root, "dist", "bundle", "reconcile.mjs"))})`,
    ],
    {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "silent" },
    },
  );
  expect(r.status).not.toBe(0);
  return r.stderr;
}

describe("the bundles' source maps", () => {
  it("name the module and line of a stack frame under --enable-source-maps, and change nothing without it", () => {
    expect(loadReconcile(["--enable-source-maps"])).toMatch(
      /SERVICELB_STORE is required[\s\S]*\n\s+at \S+ \(\S*dist\/shared\/app\/function-options\.js:\d+:\d+\)/,
    );
    expect(loadReconcile([])).toMatch(/\n\s+at \S+ \(\S*dist\/bundle\/reconcile-worker\.mjs:\d+:\d+\)/);
  });
});
