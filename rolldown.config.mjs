// One file per deployed function (reconcile: two, its module on functions-framework's thread and
// its pipeline's on a worker thread): Node resolves and compiles one module instead of thousands
// (client-node alone is 2,500 model files), which cuts cold start and memory (BENCHMARKS.md).
// functions-framework stays external, its subpaths too: it loads the bundle and must share its function registry.
// The CLI is bundled too, in chunks (dist/bundle/cli/): each command imports its own code when
// it runs, so `servicelb status` compiles the store client and none of the agent or client-node.
// `--environment SERVICELB_BUNDLE:bench` (build:dev) bundles bench/render the same way instead,
// so that the render bench measures the code as it ships: zod's 48 locale modules alone are
// ~10 MiB of a process's memory when loaded one module at a time, and nothing in a bundle.
const targets =
  process.env.SERVICELB_BUNDLE === "bench"
    ? [{ input: "dist/dev/bench/render.js", file: "dist/bench/render.mjs" }]
    : [
        ...["reconcile", "reconcile-worker", "render"].map((name) => ({
          input: `dist/functions/${name}.js`,
          file: `dist/bundle/${name}.mjs`,
        })),
        { input: "dist/functions/cli.js", dir: "dist/bundle/cli" },
      ];

// client-node's generated APIs and models only define classes (and set statics on them), so a
// bundle may leave out those nobody uses. Without this, importing KubeConfig keeps all 850+
// models (config.js imports gen/index.js, which re-exports them): ~1 MB that every cold start
// parses. Models that ObjectSerializer names stay whenever a generated API is used.
const clientNodeGenerated = /[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/]gen[\\/](models|apis|types)[\\/]/;

// node-fetch 2 (client-node's Watch and KubeConfig) takes `URL` from node:url and only falls back
// to whatwg-url's when Node has none, which Node >= 10 always has; whatwg-url's tr46 table alone
// is ~400 KB that every cold start would parse. The stub keeps the fallback's shape.
const nodeFetchWithoutWhatwgUrl = {
  name: "node-fetch-without-whatwg-url",
  resolveId(id, importer) {
    if (id === "whatwg-url" && importer && /[\\/]node_modules[\\/]node-fetch[\\/]/.test(importer))
      return "\0whatwg-url-unused";
  },
  load(id) {
    if (id === "\0whatwg-url-unused") return "export const URL = globalThis.URL;\nexport default { URL };";
  },
};

// For packages without an exports map, the ES module build ("module") before the CommonJS one
// ("main", rolldown's first choice on platform node). For the AWS SDK this is what lets the bundle
// leave out what we do not use (all of client-s3's commands, every model and serializer: its
// CommonJS build is one module per package) and skip the CommonJS wrappers. It also picks
// liquidjs's liquid.node.mjs and node-fetch's lib/index.mjs: the same code as their "main".
const mainFields = ["module", "main"];

export default targets.map(({ input, file, dir }) => ({
  input,
  platform: "node",
  resolve: { mainFields },
  external: [/^node:/, /^@google-cloud\/functions-framework(\/|$)/],
  plugins: [nodeFetchWithoutWhatwgUrl],
  treeshake: { moduleSideEffects: (id) => (clientNodeGenerated.test(id) ? false : undefined) },
  // ASCII output: a source with any other character is held by V8 as UTF-16, twice the memory.
  // A source map beside each bundle, so that `node --enable-source-maps` names the modules in a
  // stack trace instead of `reconcile.mjs:325:19099`. Without its sources (they are in dist/):
  // 1.4 MB instead of 4.4 MB. Loading the bundle costs the same without the flag; with it, about
  // 25 ms more CPU per cold start (median of 15 imports of reconcile.mjs: 243 → 268 ms), which is
  // why only the local stack turns it on (BENCHMARKS.md).
  output: {
    ...(dir ? { dir } : { file, codeSplitting: false }),
    format: "esm",
    minify: true,
    charset: "ascii",
    sourcemap: true,
    sourcemapExcludeSources: true,
  },
}));
