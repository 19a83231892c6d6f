/*
 * The --error-page body, read where the config is rendered and embedded in it, so the HAProxy
 * nodes need no copy of the file.
 */

import { readFileSync } from "node:fs";
import { OptionsError } from "../core/settings/settings.js";
import { errorMessage } from "../core/error-message.js";

/** Reads --error-page: a path, or a file:// URL as the original accepted. */
export function readErrorPage(path: string | undefined): string | undefined {
  if (!path) return undefined;
  const file = path.startsWith("file://") ? path.slice("file://".length) : path;
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    throw new OptionsError(`--error-page: cannot read ${file}: ${errorMessage(err)}`);
  }
}
