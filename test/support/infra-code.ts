import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { REPO } from "./infra-manifests.js";

/**
 * The environment variables something in the deployed images actually reads, found in the code
 * itself rather than listed by hand: the project's sources, functions-framework's option table,
 * the AWS SDK's environment credential provider, and HAProxy's "${NAME}" in the templates.
 */

const require = createRequire(import.meta.url);

function matches(text: string, pattern: RegExp): string[] {
  return [...text.matchAll(pattern)].map((m) => m.slice(1).find((g) => g !== undefined)!);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(REPO, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(REPO, dir, f));
}

/** `process.env.NAME`, `env.NAME` and `env["NAME"]` in functions/ and shared/. */
export function envNamesInSources(): Set<string> {
  const names = new Set<string>();
  for (const file of [...sourceFiles("functions"), ...sourceFiles("shared")]) {
    for (const name of matches(
      readFileSync(file, "utf8"),
      /\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[\s*"([A-Z][A-Z0-9_]*)"\s*\])/g,
    ))
      names.add(name);
  }
  return names;
}

/** What functions-framework's options table reads (FUNCTION_TARGET, FUNCTION_SOURCE, ...). */
export function functionsFrameworkEnvNames(): Set<string> {
  const options = join(dirname(require.resolve("@google-cloud/functions-framework")), "options.js");
  return new Set(matches(readFileSync(options, "utf8"), /ConfigurableOption\('[a-z-]+', '([A-Z_]+)'/g));
}

/** The variables of the AWS SDK's environment credential provider (AWS_ACCESS_KEY_ID, ...). */
export function awsCredentialEnvNames(): Set<string> {
  const s3 = require.resolve("@aws-sdk/client-s3");
  const provider = createRequire(s3).resolve("@aws-sdk/credential-provider-env");
  return new Set(matches(readFileSync(provider, "utf8"), /ENV_[A-Z_]+ = "([A-Z_]+)"/g));
}

/** Variables HAProxy expands in the built-in templates, from the agent's environment. */
export function templateEnvNames(): Set<string> {
  const dir = join(REPO, "templates");
  const names = new Set<string>();
  for (const f of readdirSync(dir))
    for (const n of matches(readFileSync(join(dir, f), "utf8"), /\$\{([A-Z][A-Z0-9_]*)\}/g)) names.add(n);
  return names;
}
