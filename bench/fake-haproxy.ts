/*
 * HAProxy's side of an agent, faked so that a thousand agents fit in one process (the agent's
 * HaproxyPorts). What each fake does, and so what a fleet run does not prove:
 *
 * - The master (start, reload, stop) is no process: start and reload succeed at once and the
 *   master never dies. Real reloads cost HAProxy's parse of the config; endpoint changes take none.
 * - `haproxy -c` is the real one, run once per distinct config text in each process that hosts
 *   agents, its verdict (HAProxy's own) handed to every agent there that asks: each agent still
 *   waits for it and acts on it.
 * - The runtime API accepts every command and pattern swap it is given, and `show servers state`
 *   answers that no server has a saved state. The agent's plan (which commands, in which order)
 *   is its own; HAProxy's acceptance of each address is not tested here (bench/agent and the
 *   integration tests run the real runtime API).
 * - `show proc` answers one master (this process's pid, which is also the fake master's) and one
 *   worker, so /healthz answers as over a running HAProxy.
 */

import { createHash } from "node:crypto";
import { checkConfig, type CheckResult } from "../shared/adapters/haproxy/check.js";
import type { ProcStatus } from "../shared/adapters/haproxy/master.js";
import type { SupervisionStatus } from "../shared/adapters/haproxy/restart-policy.js";
import type { HaproxyPorts, SupervisedHaproxy } from "../shared/agent/agent.js";
import { EMPTY_SERVER_STATE } from "../shared/core/haproxy-config/server-state.js";

/** What the fakes of every agent of a process did, for the bench's report. */
export interface FakeHaproxyCounts {
  starts: number;
  reloads: number;
  /** `haproxy -c` asked for by agents, and run for real (once per distinct config). */
  checksAsked: number;
  checksRun: number;
  runtimeCommands: number;
  patternSwaps: number;
}

export interface FakeHaproxy {
  ports(): HaproxyPorts;
  counts: FakeHaproxyCounts;
}

class FakeMaster implements SupervisedHaproxy {
  running = false;

  constructor(private readonly counts: FakeHaproxyCounts) {}

  get pid(): number | undefined {
    return this.running ? process.pid : undefined;
  }

  supervision(): SupervisionStatus {
    return { restarts: 0, lastRestart: null, pendingRestart: null };
  }

  async start(): Promise<void> {
    this.counts.starts++;
    this.running = true;
  }

  async reload() {
    this.counts.reloads++;
    return { ok: true, reason: undefined };
  }

  async stop(): Promise<void> {
    this.running = false;
  }
}

const UPTIME = { reloads: 0, uptime: "0d00h00m01s", uptimeSeconds: 1, version: "fake" };

export function fakeHaproxy(): FakeHaproxy {
  const counts: FakeHaproxyCounts = {
    starts: 0,
    reloads: 0,
    checksAsked: 0,
    checksRun: 0,
    runtimeCommands: 0,
    patternSwaps: 0,
  };
  const verdicts = new Map<string, Promise<CheckResult>>();
  return {
    counts,
    ports: () => ({
      supervise: () => new FakeMaster(counts),
      check(text, opts) {
        counts.checksAsked++;
        const digest = createHash("sha256").update(text).digest("hex");
        let verdict = verdicts.get(digest);
        if (!verdict) {
          counts.checksRun++;
          // Not the asking agent's abort signal: other agents wait for the same verdict.
          verdict = checkConfig(text, { ...opts, signal: undefined });
          verdicts.set(digest, verdict);
        }
        return verdict;
      },
      runtime: {
        async runAll(_socket, commands) {
          counts.runtimeCommands += commands.length;
        },
        async swapPatterns() {
          counts.patternSwaps++;
        },
        serversState: async () => EMPTY_SERVER_STATE,
      },
      showProc: async (): Promise<ProcStatus> => ({
        master: { pid: process.pid, failedReloads: 0, ...UPTIME },
        workers: [{ pid: process.pid, ...UPTIME }],
        oldWorkers: [],
      }),
    }),
  };
}
