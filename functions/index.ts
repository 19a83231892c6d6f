/*
 * The package's main module, for platforms that load one module and pick the function by name
 * (Google Cloud Functions sets FUNCTION_TARGET): registers just that function, from its bundle
 * (rolldown.config.mjs, built by gcp-build as by the images), so each deployed function loads
 * only its own code and loads it as one module.
 */

const TARGETS = new Set(["render", "reconcile"]);
const target = process.env.FUNCTION_TARGET ?? "";
if (!TARGETS.has(target)) {
  throw new Error(`FUNCTION_TARGET must be one of ${[...TARGETS].join(", ")}; got ${JSON.stringify(target)}`);
}
await import(`../bundle/${target}.mjs`);
