import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

/**
 * What must never ship in an image or the Cloud Functions package: the local stack
 * (shared/dev), the development build (dist/dev), tests and benchmarks, as sources or compiled.
 */
export function developmentOnly(path: string): boolean {
  return /(^|\/)(dist\/dev|shared\/dev|test|bench)\//.test(path.replaceAll("\\", "/"));
}

/** Every file under `dir` (relative paths), node_modules left out: the dependencies are npm's. */
export function filesUnder(dir: string, root = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name === "node_modules") return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? filesUnder(path, root) : [relative(root, path)];
  });
}

/** The servicelb modules a rolldown bundle was made from, by its source map (dependencies left out). */
export function bundledModules(sourceMap: string): string[] {
  const { sources } = JSON.parse(readFileSync(sourceMap, "utf8")) as { sources: string[] };
  return sources.filter((s) => !s.includes("node_modules"));
}
