import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseRenderOptions, type RenderOptions, type RenderOptionsInput } from "../../shared/core/settings/options.js";
import { patternFileText, splitConfig } from "../../shared/core/haproxy-config/pattern-files.js";
import { freePort } from "./net.js";

/** Tests that need HAProxy fail (never skip) when it is missing, and say how to install it. */
export function requireHaproxy(): void {
  const r = spawnSync("haproxy", ["-v"], { encoding: "utf8" });
  if (r.error || r.status !== 0)
    throw new Error("haproxy is not installed: run `apt-get install -y haproxy` (Debian's 2.6 or later)");
}

export interface LoopbackSetup {
  dir: string;
  options: RenderOptions;
  cleanup(): void;
}

/** Two different free ports (two calls to freePort may hand out the same one). */
async function twoPorts(): Promise<{ httpPort: number; statsPort: number }> {
  const httpPort = await freePort();
  let statsPort = await freePort();
  while (statsPort === httpPort) statsPort = await freePort();
  return { httpPort, statsPort };
}

/** Render options that make a config runnable by an unprivileged test: loopback, free ports, a temp dir. */
export async function loopbackOptions(extra: RenderOptionsInput = {}): Promise<LoopbackSetup> {
  const dir = mkdtempSync(join(tmpdir(), "servicelb-hx-"));
  const options = parseRenderOptions({
    bindAddress: "127.0.0.1",
    ...(await twoPorts()),
    statsSocket: join(dir, "admin.sock"),
    serverStateFile: join(dir, "server-state"),
    checkInterval: "500ms",
    ...extra,
  });
  return { dir, options, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The config's pattern files (core/haproxy-config/pattern-files.ts) into `dir`, as the agent writes them beside haproxy.cfg. */
export function writePatternFiles(config: string, dir: string): void {
  const split = splitConfig(config);
  if ("error" in split) throw new Error(split.error);
  for (const [path, entries] of split.files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), patternFileText(entries));
  }
}

/**
 * `haproxy -c` on a config text, its pattern files beside it; returns HAProxy's output when it
 * rejects the config. `env`: HAProxy's environment (default: the test's).
 */
export function haproxyCheck(config: string, dir: string, env?: NodeJS.ProcessEnv): { ok: boolean; output: string } {
  const file = join(dir, `check-${process.pid}-${Math.random().toString(36).slice(2)}.cfg`);
  writePatternFiles(config, dir);
  writeFileSync(file, config);
  const r = spawnSync("haproxy", ["-c", "-q", "-f", file], { encoding: "utf8", env });
  rmSync(file, { force: true });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

export interface RunningHaproxy {
  child: ChildProcess;
  output: () => string;
  stop(): Promise<void>;
}

/**
 * Runs HAProxy in the foreground on `config` (its pattern files beside it) until stop(); rejects
 * if it exits during start-up. `env`: HAProxy's environment (default: the test's).
 */
export async function runHaproxy(config: string, dir: string, env?: NodeJS.ProcessEnv): Promise<RunningHaproxy> {
  const file = join(dir, "haproxy.cfg");
  writePatternFiles(config, dir);
  writeFileSync(file, config);
  const child = spawn("haproxy", ["-W", "-f", file], { stdio: ["ignore", "pipe", "pipe"], env });
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => (/New worker/.test(out) ? resolve() : reject(new Error(`haproxy did not start:\n${out}`))),
      5000,
    );
    const poll = setInterval(() => {
      if (/New worker|Loading success/.test(out)) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve();
      }
    }, 20);
    child.once("exit", (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`haproxy exited with ${code} during start-up:\n${out}`));
    });
  });
  return {
    child,
    output: () => out,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
