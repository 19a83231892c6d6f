import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { OptionsError } from "../core/settings/settings.js";
import { TEMPLATE_FILES, type TemplateSet } from "../core/render/template-views.js";

/** The repository root, found from this file whether it runs from source or from dist/. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "templates", TEMPLATE_FILES.main))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error("servicelb: cannot find the templates/ folder of the installation");
    dir = up;
  }
}

export const BUILTIN_TEMPLATE_DIR = (): string => join(packageRoot(), "templates");

/**
 * The built-in templates, or a user's main template (--template FILE) with the fragments found
 * beside it; a fragment the user did not provide comes from the built-in set.
 */
export function loadTemplates(mainPath?: string): TemplateSet {
  // A bad setting, not a failure: the CLI exits 2 and names where the path came from.
  if (mainPath && !existsSync(mainPath))
    throw new OptionsError(`--template / SERVICELB_TEMPLATE: ${mainPath} does not exist`);
  const builtin = BUILTIN_TEMPLATE_DIR();
  const userDir = mainPath ? dirname(resolve(mainPath)) : undefined;
  const read = (key: keyof TemplateSet): string => {
    if (key === "main" && mainPath) return readFileSync(mainPath, "utf8");
    const user = userDir ? join(userDir, TEMPLATE_FILES[key]) : undefined;
    return readFileSync(user && existsSync(user) ? user : join(builtin, TEMPLATE_FILES[key]), "utf8");
  };
  return {
    main: read("main"),
    backend: read("backend"),
    server: read("server"),
    httpRule: read("httpRule"),
    tcpFrontend: read("tcpFrontend"),
  };
}
