/*
 * A core kept busy by another process, the condition of a shared node: a child that spins
 * forever, optionally pinned to one CPU with taskset (pinned, it takes that core and leaves the
 * scheduler the rest; unpinned, the scheduler moves it between cores). The benchmarks start it
 * beside what they measure and report the CPU share it actually got.
 */

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

export interface BusyCore {
  pid: number;
  /** The CPU it is pinned to, or null when the scheduler places it. */
  cpu: number | null;
  /** CPU time it used per wall-clock time since it started: 1 is one whole core. */
  share(): number;
  stop(): Promise<void>;
}

/** utime + stime of `pid` in milliseconds (fields 14 and 15 of proc(5), 100 ticks per second). */
export function cpuTimeMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export function startBusyCore(cpu: number | null): BusyCore {
  const spin = [process.execPath, "-e", "for (;;) {}"];
  // taskset execs node in place, so the child's pid is the spinning process's.
  const child =
    cpu === null
      ? spawn(spin[0]!, spin.slice(1), { stdio: "ignore" })
      : spawn("taskset", ["-c", String(cpu), ...spin], { stdio: "ignore" });
  if (child.pid === undefined) throw new Error("cannot start the busy-loop process");
  const pid = child.pid;
  const started = performance.now();
  const startCpu = cpuTimeMs(pid);
  let stopped: { cpuMs: number; at: number } | undefined;
  return {
    pid,
    cpu,
    share() {
      const { cpuMs, at } = stopped ?? { cpuMs: cpuTimeMs(pid) - startCpu, at: performance.now() };
      return cpuMs / (at - started);
    },
    async stop() {
      if (stopped) return;
      stopped = { cpuMs: cpuTimeMs(pid) - startCpu, at: performance.now() };
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
    },
  };
}

/**
 * The busy core a benchmark's flags ask for: `--busy-core` (placed by the scheduler) or
 * `--busy-core-pin CPU` (pinned to that CPU); null without either.
 */
export function busyCoreFromArgs(argv: string[]): BusyCore | null {
  const pin = argv.indexOf("--busy-core-pin");
  if (pin >= 0) {
    const cpu = Number(argv[pin + 1]);
    if (!Number.isInteger(cpu) || cpu < 0) throw new Error(`--busy-core-pin takes a CPU number, got ${argv[pin + 1]}`);
    return startBusyCore(cpu);
  }
  return argv.includes("--busy-core") ? startBusyCore(null) : null;
}

/** How a table header says it: "one core kept busy by a spinning process pinned to CPU 1 (it got 0.97 of a core)". */
export function describeBusyCore(busy: BusyCore | null): string {
  if (!busy) return "no busy-loop process beside it";
  const where = busy.cpu === null ? "placed by the scheduler" : `pinned to CPU ${busy.cpu}`;
  return `one core kept busy by a spinning process ${where} (it got ${busy.share().toFixed(2)} of a core)`;
}
