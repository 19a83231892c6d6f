/*
 * The installed servicelb's version, from its package.json: printed by `--version`, recorded with
 * each published config (its producer) and in each agent's status report.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "./templates.js";

export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;
}
