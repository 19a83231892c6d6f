import { spawnSync } from "node:child_process";
import { cpSync, existsSync, readFileSync, symlinkSync } from "node:fs";
import { join, posix, relative } from "node:path";

/** Just enough of the Dockerfile and .dockerignore syntax to check infra/images/ without a Docker engine. */

export interface Instruction {
  keyword: string;
  args: string;
}

export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

export function parseDockerfile(path: string): Stage[] {
  const lines = readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => !/^\s*#/.test(l))
    .join("\n")
    .replace(/\\\n/g, " ")
    .split("\n")
    .filter((l) => l.trim() !== "");
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, keyword, args] = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line)!;
    const instruction = { keyword: keyword!.toUpperCase(), args: args!.trim().replace(/\s+/g, " ") };
    if (instruction.keyword === "FROM") {
      const [from, , name] = instruction.args.split(" ");
      stages.push({ from: from!, name, instructions: [] });
    } else {
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return stages;
}

export function argsOf(stage: Stage, keyword: string): string[] {
  return stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
}

/** CMD or ENTRYPOINT in exec form (a JSON array); shell form is refused: it would not get SIGTERM. */
export function execForm(stage: Stage, keyword: "CMD" | "ENTRYPOINT"): string[] | undefined {
  const args = argsOf(stage, keyword).at(-1);
  return args === undefined ? undefined : (JSON.parse(args) as string[]);
}

/** ENV NAME=value pairs (unquoted values). */
export function envOf(stage: Stage): Record<string, string> {
  return Object.fromEntries(
    argsOf(stage, "ENV").flatMap((a) => a.split(" ").map((kv) => kv.split("=", 2) as [string, string])),
  );
}

/** The sources of COPY instructions from the build context (not --from another stage). */
export function contextCopies(stage: Stage): string[] {
  return argsOf(stage, "COPY")
    .filter((a) => !a.startsWith("--from="))
    .flatMap((a) => a.split(" ").slice(0, -1));
}

/** What a .dockerignore lets into the build context. */
export interface BuildContext {
  /** A top-level name is let in (some of it, at least). */
  has(name: string): boolean;
  /** A path relative to the context is let in. */
  admits(path: string): boolean;
}

/**
 * Reads a .dockerignore of the allowlist form only: "*", then "!name" lines (top-level names let
 * in), then "name/sub" lines (folders inside them kept out again; the last match wins, as in
 * Docker). Anything else is refused, so that this reading stays exact.
 */
export function allowedByDockerignore(path: string): BuildContext {
  const patterns = readFileSync(path, "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const allowLines = patterns.slice(1).filter((p) => p.startsWith("!"));
  const keptOut = patterns.slice(1 + allowLines.length);
  if (
    patterns[0] !== "*" ||
    allowLines.some((p) => !/^![A-Za-z0-9._-]+\/?$/.test(p)) ||
    keptOut.some((p) => !/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)+\/?$/.test(p))
  ) {
    throw new Error(`${path}: expected "*", then "!name" lines, then "name/sub" lines only`);
  }
  const allowed = new Set(allowLines.map((p) => p.slice(1).replace(/\/$/, "")));
  const excluded = keptOut.map((p) => p.replace(/\/$/, ""));
  return {
    has: (name) => allowed.has(name),
    admits: (rel) => allowed.has(rel.split("/")[0]!) && !excluded.some((e) => rel === e || rel.startsWith(`${e}/`)),
  };
}

/**
 * Builds a stage the way `docker build` would, without a Docker engine, into `dir` (its WORKDIR):
 * COPY takes from the build context only what the .dockerignore lets in, `COPY --from` takes
 * from the directories of earlier stages, RUN lines run in `dir` in order. `npm ci` is stood in
 * for by a link to this checkout's node_modules (it installs what package-lock.json pins, i.e.
 * the same tree), running the lifecycle scripts npm would run unless `--ignore-scripts`. RUN lines
 * are run only for `runs: true`: a runtime stage's apt-get cannot run here.
 * Returns what the RUN lines printed.
 */
export function rehearseStage(
  stage: Stage,
  o: {
    context: string;
    allowed: BuildContext;
    dir: string;
    stages: ReadonlyMap<string, RehearsedStage>;
    runs: boolean;
  },
): RehearsedStage & { output: string } {
  let workdir = "/";
  let output = "";
  const env: Record<string, string> = {};
  for (const { keyword, args } of stage.instructions) {
    if (keyword === "WORKDIR") workdir = posix.resolve(workdir, args);
    if (keyword === "ENV")
      Object.assign(env, Object.fromEntries(args.split(" ").map((kv) => kv.split("=", 2) as [string, string])));
    if (keyword === "COPY") {
      const [first, ...rest] = args.split(" ");
      const from = first!.startsWith("--from=") ? o.stages.get(first!.slice("--from=".length)) : undefined;
      const words = from === undefined ? [first!, ...rest] : rest;
      const sources = words.slice(0, -1);
      const dest = underWorkdir({ dir: o.dir, workdir }, posix.resolve(workdir, words.at(-1)!));
      for (const src of sources) {
        // A name the .dockerignore keeps out is not in the context: docker says "not found".
        const path =
          from === undefined
            ? o.allowed.has(src.split("/")[0]!)
              ? join(o.context, src)
              : undefined
            : underWorkdir(from, posix.resolve(from.workdir, src));
        if (path === undefined || !existsSync(path))
          throw new Error(`COPY ${args}: ${src} not found in the ${from === undefined ? "build context" : "stage"}`);
        const target = sources.length > 1 || words.at(-1)!.endsWith("/") ? join(dest, posix.basename(src)) : dest;
        const admitted = (file: string) => from !== undefined || o.allowed.admits(relative(o.context, file));
        cpSync(path, target, { recursive: true, filter: admitted });
      }
    }
    if (keyword === "RUN" && o.runs) {
      for (const command of args.split("&&").map((c) => c.trim())) output += runCommand(command, o.dir, env, o.context);
    }
  }
  return { dir: o.dir, workdir, output };
}

/** A rehearsed stage: the directory that stands for its WORKDIR. */
export interface RehearsedStage {
  dir: string;
  workdir: string;
}

/** Where an absolute path of the image is in the stage's directory; only paths under WORKDIR are kept. */
function underWorkdir(stage: RehearsedStage, path: string): string {
  const rel = posix.relative(stage.workdir, path);
  if (rel.startsWith(".."))
    throw new Error(`${path}: outside the stage's WORKDIR ${stage.workdir}, which is all a rehearsal keeps`);
  return join(stage.dir, rel);
}

/** Runs one shell command of a build in `dir`, `npm ci` stood in for as rehearseStage says; returns what it printed. */
export function runCommand(command: string, dir: string, env: Record<string, string>, context: string): string {
  const run = (cmd: string) => {
    const r = spawnSync("sh", ["-c", cmd], {
      cwd: dir,
      env: { ...process.env, ...env },
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (r.status !== 0)
      throw Object.assign(new Error(`exit ${r.status ?? r.signal}`), { stdout: r.stdout, stderr: r.stderr });
    return r.stdout + r.stderr;
  };
  if (/^npm ci\b/.test(command)) {
    if (!existsSync(join(dir, "package-lock.json"))) throw new Error(`${command}: no package-lock.json yet`);
    symlinkSync(join(context, "node_modules"), join(dir, "node_modules"), "dir");
    if (command.includes("--ignore-scripts")) return "";
    const scripts =
      (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { scripts?: Record<string, string> }).scripts ??
      {};
    return ["preinstall", "install", "postinstall", "prepare"]
      .filter((s) => scripts[s] !== undefined)
      .map((s) => runShown(() => run(`npm run ${s}`), s))
      .join("");
  }
  // The npm cache is not part of what the image runs.
  if (/^npm cache clean\b/.test(command)) return "";
  return runShown(() => run(command), command);
}

/** Runs `f`; a failure says which step failed and what it printed. */
function runShown(f: () => string, step: string): string {
  try {
    return f();
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`${step} failed:\n${e.stdout ?? ""}${e.stderr ?? String(err)}`);
  }
}
