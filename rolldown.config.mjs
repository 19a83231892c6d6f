// One file per deployed function: Node resolves and compiles one module instead of thousands
// (client-node alone is 2,500 model files), which cuts cold start and memory (BENCHMARKS.md).
// functions-framework stays external: it loads the bundle and must share its function registry.
const targets = ["reconcile", "render"];

export default targets.map((name) => ({
  input: `dist/functions/${name}.js`,
  platform: "node",
  external: [/^node:/, "@google-cloud/functions-framework"],
  output: { file: `dist/bundle/${name}.mjs`, format: "esm", minify: true, codeSplitting: false },
}));
