import { join } from "node:path";
import { createLogger } from "../../shared/adapters/log.js";
import type { Agent } from "../../shared/agent/agent.js";
import { createRolloutGates } from "../../shared/app/rollout-gates.js";
import type { RolloutSettings } from "../../shared/core/rollout/rollout.js";
import { admissionOrder } from "../../shared/core/rollout/waves.js";
import { type agentWorld, httpGet, type Node } from "./agent.js";
import { waitFor } from "./net.js";

/*
 * Three nodes on one machine, each an agent with a real HAProxy, sharing one store and one published
 * config: the config takes each node's address and paths from HAProxy's environment
 * (core/haproxy-config/environment.ts), so node N binds 127.0.1.N on the same ports and keeps its
 * sockets beside its own haproxy.cfg. The canary rollout tests and bench/rollout drive it.
 */

/** The render settings of one config for every node. */
export const NODE_VARIABLES = {
  bindAddress: "${SERVICELB_NODE_ADDRESS}",
  statsBind: "${SERVICELB_NODE_ADDRESS}",
  statsSocket: "${SERVICELB_CONFIG_DIR}/admin.sock",
  serverStateFile: "${SERVICELB_CONFIG_DIR}/server-state",
};

export const NODE_NAMES = ["edge-a", "edge-b", "edge-c"];
/** Node N's own loopback address (Linux routes all of 127/8 to lo), apart from the echo pods' 127.0.0.x. */
export const nodeAddress = (i: number) => `127.0.1.${i + 1}`;

type World = ReturnType<typeof agentWorld>;

/** Answers by node, then path, then status (0: no answer). */
export type Counts = Record<string, Record<string, Record<number, number>>>;

export interface Traffic {
  /** When each node first answered each path with 200 (ms since the epoch). */
  first200: Record<string, Record<string, number>>;
  stop(): Promise<Counts>;
}

export interface Fleet {
  node: Node;
  names: string[];
  /** The names in the order the waves admit them: the canary first. */
  canary: string;
  others: string[];
  agents: Record<string, Agent>;
  address: Record<string, string>;
  /** Every key each node reported running, in order. */
  ran: Record<string, string[]>;
  /** GET path through the node's own HAProxy. */
  get(name: string, path: string): Promise<{ status: number; body: string }>;
  /**
   * Steps rollout.json as a reconcile pass does, every 250 ms, until stopped; `fresh`: each step by
   * a new runner, as if the function instance were replaced at every pass.
   */
  ticking(fresh?: boolean): { stop(): Promise<void> };
  /** Requests through every node's HAProxy, every 15 ms, counted by node, path and status. */
  traffic(paths: string[]): Traffic;
  /** Every node runs `key`, by its own status and by its report in the store (what the gates read). */
  allRun(key: string, timeoutMs?: number): Promise<void>;
}

export async function canaryFleet(
  world: World,
  settings: RolloutSettings,
  agentFlags: Record<string, unknown>,
  logLevel = process.env.AGENT_TEST_LOG ?? "silent",
): Promise<Fleet> {
  const log = createLogger("canary-fleet", logLevel);
  const node = await world.node(NODE_VARIABLES);
  const [canary, ...others] = admissionOrder(NODE_NAMES) as [string, ...string[]];
  const agents: Record<string, Agent> = {};
  const address: Record<string, string> = {};
  for (const [i, name] of NODE_NAMES.entries()) {
    const dir = join(node.dir, name);
    address[name] = nodeAddress(i);
    agents[name] = await world.start(node, {
      ...agentFlags,
      nodeName: name,
      nodeAddress: address[name],
      configPath: join(dir, "haproxy.cfg"),
      stateDir: join(dir, "state"),
      masterSocket: join(dir, "master.sock"),
    });
  }
  const ran: Record<string, string[]> = Object.fromEntries(NODE_NAMES.map((n) => [n, []]));
  const watch = setInterval(() => {
    for (const name of NODE_NAMES) {
      const key = agents[name]!.status().applied?.key;
      if (key && ran[name]!.at(-1) !== key) ran[name]!.push(key);
    }
  }, 20);
  world.cleanups.push(() => clearInterval(watch));
  const gates = createRolloutGates(node.store, settings, log);
  const get = (name: string, path: string) => httpGet(node.lb.options.httpPort, path, false, {}, address[name]);
  return {
    node,
    names: NODE_NAMES,
    canary,
    others,
    agents,
    address,
    ran,
    get,
    ticking(fresh = false) {
      let stopped = false;
      const loop = (async () => {
        while (!stopped) {
          // A failed step fails the pass, and the next tick runs another, as the Broker would retry.
          const { config } = await node.store.newest();
          const runner = fresh ? createRolloutGates(node.store, settings, log) : gates;
          if (config) await runner.step(config).catch((err: unknown) => log.warn({ err }, "rollout step failed"));
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      const stop = async () => {
        stopped = true;
        await loop;
      };
      // Cleanups run last first: a test that fails before it stops the tick still has it stopped
      // before its store is closed under it.
      world.cleanups.push(stop);
      return { stop };
    },
    traffic(paths) {
      let stopped = false;
      const counts: Counts = Object.fromEntries(
        NODE_NAMES.map((n) => [n, Object.fromEntries(paths.map((p) => [p, {}]))]),
      );
      const first200: Traffic["first200"] = Object.fromEntries(NODE_NAMES.map((n) => [n, {}]));
      const loop = (async () => {
        while (!stopped) {
          await Promise.all(
            NODE_NAMES.map(async (name) => {
              for (const path of paths) {
                const { status } = await get(name, path).catch(() => ({ status: 0 }));
                counts[name]![path]![status] = (counts[name]![path]![status] ?? 0) + 1;
                if (status === 200) first200[name]![path] ??= Date.now();
              }
            }),
          );
          await new Promise((r) => setTimeout(r, 15));
        }
      })();
      return {
        first200,
        async stop() {
          stopped = true;
          await loop;
          return counts;
        },
      };
    },
    async allRun(key, timeoutMs = 15_000) {
      await waitFor(
        `every node runs ${key}`,
        async () => (NODE_NAMES.every((n) => agents[n]!.status().applied?.key === key) ? true : undefined),
        timeoutMs,
      );
      await waitFor(
        `every node reports ${key}`,
        async () => {
          const reports = (await node.store.listStatuses().catch(() => [])) as Array<{
            node?: string;
            applied?: { key?: string };
          }>;
          return NODE_NAMES.every((n) => reports.some((r) => r.node === n && r.applied?.key === key))
            ? true
            : undefined;
        },
        timeoutMs,
      );
    },
  };
}
