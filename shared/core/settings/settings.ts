/*
 * One way to describe a setting, for every process that has settings (the render options, the
 * functions, the agent, the CLI): a spec gives its zod schema and help, and its camelCase key
 * gives the config-file key, the `--kebab-case` flag and the SERVICELB_<UPPER_SNAKE> variable.
 * Deriving the names keeps a flag, its variable and its file key from drifting apart. Values
 * arrive as strings (flags, variables) or typed (config file); each schema accepts both.
 */

import { z } from "zod";

export interface SettingSpec {
  schema: z.ZodType;
  help: string;
  /** A switch: a bare flag on the command line (`--syslog`), true when given. */
  switch?: true;
  /** A secret: read from its variable only, since a flag would show it in `ps`. */
  envOnly?: true;
  /** What --help calls the flag's value (default: value). */
  placeholder?: string;
}

export type SettingSpecs = Readonly<Record<string, SettingSpec>>;
type SchemaShape<S extends SettingSpecs> = { [K in keyof S]: S[K]["schema"] };
/** Parsed values: a setting with neither value nor default is an optional key. */
export type SettingValues<S extends SettingSpecs> = z.output<z.ZodObject<SchemaShape<S>>>;
export type SettingInputs<S extends SettingSpecs> = Partial<z.input<z.ZodObject<SchemaShape<S>>>>;

/** A setting that cannot be used as given: the CLI exits 2, a function refuses to start. */
export class OptionsError extends Error {
  override name = "OptionsError";
}

/** A switch as a variable or file value gives it: true/false, yes/no, on/off, 1/0. */
export const bool = z.union([z.boolean(), z.stringbool()], { error: "true or false" });

/** A whole number from `min` to `max`, from a string or a number; `message` says which. */
export function wholeNumber(message: string, min: number, max: number) {
  return z.coerce.number({ error: message }).int(message).min(min, message).max(max, message);
}

export function flagName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

export function envName(key: string): string {
  return `SERVICELB_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** The flag as commander declares it (`--syslog`, `--http-port <value>`); undefined for a secret. */
export function flagSyntax(key: string, spec: SettingSpec): string | undefined {
  if (spec.envOnly) return undefined;
  return spec.switch ? `--${flagName(key)}` : `--${flagName(key)} <${spec.placeholder ?? "value"}>`;
}

/** Both names a user may have set it by (`--store / SERVICELB_STORE`), or the variable alone for a secret. */
export function flagAndEnvName(key: string, spec: SettingSpec | undefined): string {
  return spec?.envOnly ? envName(key) : `--${flagName(key)} / ${envName(key)}`;
}

/** One strict object schema of the specs: an unknown key is an error, not ignored. */
export function settingsSchema<S extends SettingSpecs>(specs: S) {
  return z.object(Object.fromEntries(Object.entries(specs).map(([k, v]) => [k, v.schema])) as SchemaShape<S>).strict();
}

/** Values of `keys` found in SERVICELB_* environment variables; other variables are left to other readers. */
export function settingsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  keys: readonly string[],
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of keys) {
    const value = env[envName(key)];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** The flags (commander's camelCase keys) that are given and name a setting a flag may set. */
export function settingsFromFlags(
  flags: Readonly<Record<string, unknown>>,
  specs: SettingSpecs,
): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(flags).filter(([k, v]) => v !== undefined && Object.hasOwn(specs, k) && !specs[k]!.envOnly),
  );
}

/** The settings of a merged record (flags, variables and file carry others too) that `specs` describes. */
export function pickSettings(all: Readonly<Record<string, unknown>>, specs: SettingSpecs): Record<string, unknown> {
  return Object.fromEntries(
    Object.keys(specs)
      .filter((k) => all[k] !== undefined)
      .map((k) => [k, all[k]]),
  );
}

/**
 * Validates `input` with `schema`; the error has one line per bad setting, named by `nameOf`
 * the way its users set it (a flag for the CLI, a variable for a function, both for the agent).
 */
export function parseSettings<T extends z.ZodType>(
  schema: T,
  input: unknown,
  nameOf: (key: string) => string,
): z.output<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw new OptionsError(
    result.error.issues
      .map((i) => {
        const key = i.path[0];
        return key === undefined || key === "" ? i.message : `${nameOf(String(key))}: ${i.message}`;
      })
      .join("\n"),
  );
}
