/*
 * Many agents in one process: each is `startAgent` as `servicelb agent` runs it — its own options,
 * store client, HTTP API, state and config files, poll loop and status reports — with only
 * HAProxy faked (fake-haproxy.ts). Each agent's store endpoint is its own (store-proxy.ts counts
 * per endpoint), and the stage trace wrapped around its stages (app/agent-trace.ts) says when it took which
 * config and how.
 */

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLogger } from "../shared/adapters/log.js";
import { type Agent, startAgent } from "../shared/agent/agent.js";
import { parseAgentOptions } from "../shared/agent/options.js";
import { traceAgent } from "../shared/app/agent-trace.js";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";
import { type FakeHaproxyCounts, fakeHaproxy } from "./fake-haproxy.js";

/** One agent's trace event, stamped with this process's clock (performance.timeOrigin-based, ms). */
export interface AgentEvent {
  node: string;
  ev: string;
  at: number;
  key?: string;
  via?: string;
  how?: string;
}

/** What a host process is told (fleet-host.ts): plain data. */
export interface FleetAgentsSettings {
  /** Node names, one agent each. */
  nodes: readonly string[];
  /** s3://bucket/prefix the configs are published under. */
  store: string;
  /** Where each agent's directory goes. */
  dir: string;
  token: string;
  /** --poll-interval and --status-interval, as the flags take them ("30s"). */
  pollInterval: string;
  statusInterval: string;
}

export interface FleetAgentsOptions extends FleetAgentsSettings {
  /** The store endpoint of one node. */
  endpointOf(node: string): Promise<string>;
  onEvent(event: AgentEvent): void;
}

export interface FleetState {
  /** Per node: the config its agent runs. */
  applied: Record<string, { key: string | null; sha256: string; how: string } | null>;
  /** Store failures the agents counted (after the SDK's own retry) and failed loop runs, since they started. */
  escapedErrors: number;
  counts: FakeHaproxyCounts;
  /** Per host process (fleet-host.ts): its agents, and its memory now and at its peak. */
  hosts?: Array<{ agents: number; rssMiB: number; peakRssMiB: number; heapUsedMiB: number }>;
}

export interface FleetAgents {
  agents: ReadonlyMap<string, Agent>;
  state(): Promise<FleetState>;
  stop(): Promise<void>;
}

/** The sum of one agent's counter (every label). */
async function counted(metric: { get(): Promise<{ values: Array<{ value: number }> }> }): Promise<number> {
  return (await metric.get()).values.reduce((a, v) => a + v.value, 0);
}

const now = () => performance.timeOrigin + performance.now();

export async function startFleetAgents(o: FleetAgentsOptions): Promise<FleetAgents> {
  const haproxy = fakeHaproxy();
  // One logger for all: errors only, each line names its node.
  const log = createLogger("fleet-agent", process.env.LOG_LEVEL ?? "error");
  const tokenFile = join(o.dir, "token");
  mkdirSync(o.dir, { recursive: true });
  writeFileSync(tokenFile, `${o.token}\n`);
  const agents = new Map<string, Agent>();
  const start = async (node: string) => {
    const dir = join(o.dir, node);
    const options = parseAgentOptions(
      {},
      {
        store: o.store,
        storeEndpoint: await o.endpointOf(node),
        storePathStyle: "true",
        nodeName: node,
        listen: "127.0.0.1:0",
        configPath: join(dir, "haproxy.cfg"),
        masterSocket: join(dir, "master.sock"),
        pollInterval: o.pollInterval,
        statusInterval: o.statusInterval,
        notifyTokenFile: tokenFile,
      },
    );
    const agent = await startAgent(options, {
      log: log.child({ node }),
      storeCredentials: S3RVER_CREDENTIALS,
      haproxyLog: () => undefined,
      haproxyPorts: haproxy.ports(),
      decorate: traceAgent((ev, fields = {}) =>
        o.onEvent({
          node,
          ev,
          at: now(),
          key: typeof fields.key === "string" ? fields.key : undefined,
          via: typeof fields.via === "string" ? fields.via : undefined,
          how: typeof fields.how === "string" ? fields.how : undefined,
        }),
      ),
    });
    agents.set(node, agent);
  };
  // A few at a time: each start pulls the newest config, as a node joining a fleet does.
  const queue = [...o.nodes];
  await Promise.all(
    Array.from({ length: Math.min(32, queue.length) }, async () => {
      for (let node = queue.shift(); node !== undefined; node = queue.shift()) await start(node);
    }),
  );
  return {
    agents,
    async state() {
      const applied: FleetState["applied"] = {};
      let escapedErrors = 0;
      for (const [node, agent] of agents) {
        const a = agent.status().applied;
        applied[node] = a && { key: a.key, sha256: a.sha256, how: a.how };
        escapedErrors += (await counted(agent.metrics.storeFailures)) + (await counted(agent.metrics.loopFailures));
      }
      return { applied, escapedErrors, counts: { ...haproxy.counts } };
    },
    async stop() {
      await Promise.all([...agents.values()].map((a) => a.stop()));
    },
  };
}
