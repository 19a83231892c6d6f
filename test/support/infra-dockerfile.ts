import { readFileSync } from "node:fs";

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
  return Object.fromEntries(argsOf(stage, "ENV").flatMap((a) => a.split(" ").map((kv) => kv.split("=", 2) as [string, string])));
}

/** The sources of COPY instructions from the build context (not --from another stage). */
export function contextCopies(stage: Stage): string[] {
  return argsOf(stage, "COPY")
    .filter((a) => !a.startsWith("--from="))
    .flatMap((a) => a.split(" ").slice(0, -1));
}

/**
 * Top-level names a .dockerignore lets into the context. Only the allowlist form is understood
 * ("*", then "!name" lines), and anything else is refused, so that this reading stays exact.
 */
export function allowedByDockerignore(path: string): Set<string> {
  const patterns = readFileSync(path, "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  if (patterns[0] !== "*" || patterns.slice(1).some((p) => !/^![A-Za-z0-9._-]+\/?$/.test(p))) {
    throw new Error(`${path}: expected "*" followed by "!name" lines only`);
  }
  return new Set(patterns.slice(1).map((p) => p.slice(1).replace(/\/$/, "")));
}
