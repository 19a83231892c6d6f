import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { OptionsError, optionsFromEnv } from "../core/options.js";

/**
 * Where settings come from, lowest precedence first: a config file (JSON or YAML object with the
 * options' camelCase names), SERVICELB_* environment variables, then command-line flags.
 */
export function mergeOptionSources(opts: {
  keys: readonly string[];
  configFile?: string;
  env?: Readonly<Record<string, string | undefined>>;
  flags?: Readonly<Record<string, unknown>>;
}): Record<string, unknown> {
  let fromFile: Record<string, unknown> = {};
  if (opts.configFile) {
    let text: string;
    try {
      text = readFileSync(opts.configFile, "utf8");
    } catch (err) {
      throw new OptionsError(`--config: cannot read ${opts.configFile}: ${(err as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(text);
    } catch (err) {
      throw new OptionsError(`--config: ${opts.configFile} is not valid YAML/JSON: ${(err as Error).message}`);
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
      throw new OptionsError(`--config: ${opts.configFile} must hold an object of options`);
    const unknown = Object.keys(parsed).filter((k) => !opts.keys.includes(k));
    if (unknown.length > 0)
      throw new OptionsError(`--config: unknown option(s) ${unknown.join(", ")} in ${opts.configFile}`);
    fromFile = parsed as Record<string, unknown>;
  }
  const fromEnv = opts.env ? optionsFromEnv(opts.env, opts.keys) : {};
  const fromFlags = Object.fromEntries(
    Object.entries(opts.flags ?? {}).filter(([k, v]) => v !== undefined && opts.keys.includes(k)),
  );
  return { ...fromFile, ...fromEnv, ...fromFlags };
}

/** Reads --error-page (a path, or file:// URL as the original accepted); the body is embedded in the config. */
export function readErrorPage(path: string | undefined): string | undefined {
  if (!path) return undefined;
  const file = path.startsWith("file://") ? path.slice("file://".length) : path;
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    throw new OptionsError(`--error-page: cannot read ${file}: ${(err as Error).message}`);
  }
}
