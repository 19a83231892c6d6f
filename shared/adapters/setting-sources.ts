/*
 * Where settings come from, lowest precedence first: a config file (a JSON or YAML object keyed by
 * the settings' camelCase names), SERVICELB_* environment variables, then command-line flags.
 */

import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { OptionsError, type SettingSpecs, settingsFromEnv, settingsFromFlags } from "../core/settings/settings.js";
import { errorMessage } from "../core/error-message.js";

/**
 * The raw values of the settings `specs` describes, merged from the file (`--config`, else
 * SERVICELB_CONFIG), the variables and the flags. A file key no spec describes is an error.
 */
export function mergeSettingSources(opts: {
  specs: SettingSpecs;
  env: Readonly<Record<string, string | undefined>>;
  flags?: Readonly<Record<string, unknown>>;
}): Record<string, unknown> {
  const flags = opts.flags ?? {};
  const keys = Object.keys(opts.specs);
  const configFile = (flags.config as string | undefined) ?? opts.env.SERVICELB_CONFIG;
  return {
    ...(configFile ? readConfigFile(configFile, keys) : {}),
    ...settingsFromEnv(opts.env, keys),
    ...settingsFromFlags(flags, opts.specs),
  };
}

function readConfigFile(file: string, keys: readonly string[]): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new OptionsError(`--config: cannot read ${file}: ${errorMessage(err)}`);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (err) {
    throw new OptionsError(`--config: ${file} is not valid YAML/JSON: ${errorMessage(err)}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    throw new OptionsError(`--config: ${file} must hold an object of options`);
  const unknown = Object.keys(parsed).filter((k) => !keys.includes(k));
  if (unknown.length > 0) throw new OptionsError(`--config: unknown option(s) ${unknown.join(", ")} in ${file}`);
  return parsed as Record<string, unknown>;
}
