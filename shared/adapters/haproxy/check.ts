import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseTimeoutMs } from "../../core/render/parse-time.js";
import { patternFileText, splitConfig } from "../../core/haproxy-config/pattern-files.js";
import type { HaproxyEnv } from "../../core/haproxy-config/environment.js";

export const HAPROXY_INSTALL_HINT = "apt-get install -y haproxy";

/**
 * `alerted`: HAProxy said why (ALERT lines), i.e. a verdict on the config. Without, it exited
 * non-zero without saying why (say it could not load): nothing is known about the config.
 */
export type CheckResult =
  | { ok: true; warnings: string[] }
  | { ok: false; errors: string[]; output: string; alerted: boolean };

export interface CheckOptions {
  haproxyBin?: string;
  /** HAProxy's environment, as the master it checks for runs with (default: this process's). */
  env?: HaproxyEnv;
  /** Where the temporary config is written; put it beside the live config so relative paths resolve alike. */
  workDir?: string;
  timeoutMs?: number;
  /** Kills the check (e.g. its config was superseded); checkConfig then rejects with an AbortError. */
  signal?: AbortSignal;
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

function run(
  bin: string,
  args: string[],
  timeoutMs: number,
  signal?: AbortSignal,
  env?: CheckOptions["env"],
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, signal, env }, (err, stdout, stderr) => {
      if (signal?.aborted)
        return reject(
          signal.reason instanceof Error ? signal.reason : new DOMException("haproxy -c aborted", "AbortError"),
        );
      // execFile reports an exit status as a numeric code, a failure to run as a string code.
      const code = (err as (Error & { code?: number | string; killed?: boolean }) | null)?.code;
      if (!err) resolve({ code: 0, stdout, stderr });
      else if (typeof code === "number") resolve({ code, stdout, stderr });
      else if (code === "ENOENT")
        reject(new Error(`HAProxy binary "${bin}" not found; install it: ${HAPROXY_INSTALL_HINT}`));
      else if (err.killed) reject(new Error(`${bin} ${args.join(" ")} did not finish within ${timeoutMs} ms`));
      else reject(err);
    });
  });
}

/**
 * HAProxy's diagnostics of one severity, one string per message: the "[ALERT]    (1234) : "
 * prefix is dropped (the pid is noise) and "   | " continuation lines are folded in.
 */
function messages(output: string, level: "ALERT" | "WARNING"): string[] {
  const out: string[] = [];
  let inLevel = false;
  for (const line of output.split("\n")) {
    const head = /^\[(\w+)\]\s+\(\d+\)\s*:\s?(.*)$/.exec(line);
    if (head) {
      inLevel = head[1] === level;
      if (inLevel) out.push(head[2]!.trim());
    } else if (inLevel && /^\s+\|/.test(line)) {
      out[out.length - 1] += ` ${line.replace(/^\s+\|\s?/, "").trim()}`;
    } else {
      inLevel = false;
    }
  }
  return out;
}

/**
 * `haproxy -c` on a config text, its pattern files (core/haproxy-config/pattern-files.ts) written beside it, so
 * the check reads the lists HAProxy will. A missing binary or a hung check throws: those are not
 * verdicts on the config.
 */
export async function checkConfig(
  text: string | Uint8Array,
  { haproxyBin = "haproxy", env, workDir, timeoutMs = 30_000, signal }: CheckOptions = {},
): Promise<CheckResult> {
  signal?.throwIfAborted();
  const split = splitConfig(typeof text === "string" ? text : Buffer.from(text).toString("utf8"));
  if ("error" in split) return { ok: false, errors: [split.error], output: split.error, alerted: true };
  const dir = await mkdtemp(join(workDir ?? tmpdir(), "haproxy-check-"));
  const file = join(dir, "haproxy.cfg");
  try {
    for (const [path, entries] of split.files) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), patternFileText(entries));
    }
    await writeFile(file, text);
    const r = await run(
      haproxyBin,
      ["-c", "-f", file],
      parseTimeoutMs(Buffer.byteLength(text), timeoutMs),
      signal,
      env,
    );
    // Messages name the temporary file; report it as plain "haproxy.cfg" so errors read the same every time.
    const output = `${r.stderr}${r.stdout}`.split(file).join("haproxy.cfg");
    if (r.code === 0) return { ok: true, warnings: messages(output, "WARNING") };
    const errors = messages(output, "ALERT");
    return {
      ok: false,
      errors: errors.length > 0 ? errors : [`haproxy -c exited with code ${r.code}`],
      output,
      alerted: errors.length > 0,
    };
  } finally {
    // A leftover temporary directory must not turn HAProxy's verdict into an error.
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The installed HAProxy's version (e.g. "2.6.12-1+deb12u4"), or null when it cannot be run. */
export async function haproxyAvailable(haproxyBin = "haproxy"): Promise<string | null> {
  try {
    const r = await run(haproxyBin, ["-v"], 10_000);
    if (r.code !== 0) return null;
    return /version (\S+)/i.exec(r.stdout)?.[1] ?? null;
  } catch {
    return null;
  }
}
