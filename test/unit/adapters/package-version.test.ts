import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageVersion } from "../../../shared/adapters/package-version.js";

describe("packageVersion", () => {
  it("is the version of the package.json at the repository root, from source as from dist/", () => {
    const root = join(import.meta.dirname, "..", "..", "..");
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    expect(packageVersion()).toBe(version);
    expect(version).toMatch(/^[0-9]+\.[0-9]+\.[0-9]+/);
  });
});
