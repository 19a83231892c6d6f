/*
 * `servicelb status --format json` in its own process against a store endpoint, timed from the
 * outside: wall time, the child's CPU time (GNU time's line on stderr, after whatever the command
 * wrote there), its exit code and its summary (or the command's last line on stderr). bench/status and bench/fleet time it this way.
 */
import { spawn } from "node:child_process";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";

export interface StatusCliRun {
  ms: number;
  cpuMs: number;
  exitCode: number | null;
  /** The JSON's summary, or what the command said on stderr instead (its last line before GNU time's). */
  summary: unknown;
}

/** `cli`: the servicelb launcher to run; `nodeFlags`: flags for node itself (e.g. --cpu-prof). */
export async function runStatusCli(
  cli: string,
  storeUrl: string,
  endpoint: string,
  nodeFlags: readonly string[] = [],
): Promise<StatusCliRun> {
  const started = performance.now();
  const child = spawn(
    "/usr/bin/time",
    [
      "-f",
      "cpu %U %S",
      process.execPath,
      ...nodeFlags,
      cli,
      "status",
      "--format",
      "json",
      "--store",
      storeUrl,
      "--store-endpoint",
      endpoint,
      "--store-path-style",
    ],
    {
      env: {
        ...process.env,
        AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  const exitCode = await new Promise<number | null>((resolve) => child.on("close", resolve));
  const ms = Math.round(performance.now() - started);
  const [, user, system] = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(err) ?? [];
  let summary: unknown;
  try {
    summary = (JSON.parse(out) as { summary?: unknown }).summary;
  } catch {
    // GNU time's own lines ("Command exited with non-zero status N", the cpu line) come last.
    const said = err
      .trim()
      .split("\n")
      .filter((line) => !/^(Command (exited|terminated) |cpu [\d.]+ [\d.]+$)/.test(line));
    summary = said.at(-1)?.slice(0, 300) ?? "no output";
  }
  return { ms, cpuMs: Math.round((Number(user) + Number(system)) * 1000), exitCode, summary };
}
