// `npm start`: checks the flags against the development build (--help, --version and flag errors
// answer at once), rebuilds it only when a source is newer than it (a build takes 25-30 s, a
// check of the sources' times a few ms), then runs the local stack. Plain JavaScript, because it
// runs before any build.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** What `npm run build:dev` compiles or bundles, and the files that decide how. */
export const SOURCES = [
  "functions",
  "shared",
  "bench",
  "test/support",
  "package.json",
  "package-lock.json",
  "tsconfig.json",
  "tsconfig.dev.json",
  "rolldown.config.mjs",
];

/** One file each of the build's four steps writes on every run (two tsc, two rolldown). */
export const OUTPUTS = [
  "dist/functions/cli.js",
  "dist/bundle/render.mjs",
  "dist/dev/shared/dev/main.js",
  "dist/bench/render.mjs",
];

/** The newest modification time under `path` (a file or a folder, recursively); 0 if missing. */
function newest(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let t = stat.mtimeMs;
  for (const entry of readdirSync(path)) t = Math.max(t, newest(join(path, entry)));
  return t;
}

/** Why the development build must be made again, or undefined when it is newer than every source. */
export function staleBecause(root = ROOT) {
  const built = Math.min(...OUTPUTS.map((f) => (existsSync(join(root, f)) ? statSync(join(root, f)).mtimeMs : 0)));
  if (built === 0) return "no development build yet";
  const changed = SOURCES.filter((s) => newest(join(root, s)) > built);
  return changed.length > 0 ? `changed since the last build: ${changed.join(", ")}` : undefined;
}

const CLI = join(ROOT, "dist/dev/shared/dev/local-cli.js");
const MAIN = join(ROOT, "dist/dev/shared/dev/main.js");

/**
 * The flags checked by the last build, in a process of its own: this one may load the next
 * build, and a module once loaded is not loaded again.
 */
function checkFlags(args) {
  const script = `const { localCli } = await import(${JSON.stringify(pathToFileURL(CLI).href)});
process.exitCode = await localCli(["node", "npm start", ...process.argv.slice(1)], {}, { checkOnly: true });`;
  return (
    spawnSync(process.execPath, ["--input-type=module", "-e", script, "--", ...args], { stdio: "inherit" }).status ?? 1
  );
}

async function main() {
  const args = process.argv.slice(2);
  const answers = args.some((a) => ["-h", "--help", "-V", "--version"].includes(a));
  const stale = staleBecause();
  if (existsSync(CLI)) {
    const code = checkFlags(args);
    // A build older than the sources may not know a flag just added: rebuild, and let that judge.
    if (answers || (code !== 0 && !stale)) return code;
  }
  if (stale) {
    process.stderr.write(`npm start: building (${stale})\n`);
    const build = spawnSync("npm", ["run", "build:dev", "--silent"], { cwd: ROOT, stdio: "inherit" });
    if (build.status !== 0) return build.status ?? 1;
  }
  // In this process, so that Ctrl-C reaches the stack as it did without this launcher.
  await import(pathToFileURL(MAIN).href);
  return process.exitCode;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await main();
