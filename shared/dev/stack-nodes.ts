/*
 * The nodes of `npm start`: one, as a single machine runs it, or several (--nodes N), each an agent
 * with its own HAProxy on its own loopback address (Linux routes all of 127/8 to lo), all running
 * the one config the reconcile function publishes. That config takes each node's address and paths
 * from HAProxy's environment (core/haproxy-config/environment.ts), which each agent sets for its
 * own HAProxy (--node-address, its config's directory); the nodes share the ports, and take part
 * in canary rollouts so that the waves can be watched (`servicelb status`).
 */

import { join } from "node:path";
import { CONFIG_DIR_VARIABLE, NODE_ADDRESS_VARIABLE } from "../core/haproxy-config/environment.js";
import { admissionOrder } from "../core/rollout/waves.js";
import type { HaproxyState } from "./haproxy-listens.js";

export interface StackNode {
  name: string;
  /** Where its HAProxy and its agent listen. */
  address: string;
  /** Its haproxy.cfg, beside which HAProxy keeps its sockets and files. */
  configPath: string;
  stateDir: string;
  masterSocket: string;
  /** First in the waves' order. */
  canary: boolean;
}

/** Most nodes the stack runs: loopback addresses and processes enough to watch waves, few enough for a laptop. */
export const MAX_NODES = 9;

export function stackNodes(dataDir: string, count: number): StackNode[] {
  if (count === 1)
    return [
      {
        name: "local",
        address: "127.0.0.1",
        configPath: join(dataDir, "haproxy", "haproxy.cfg"),
        stateDir: join(dataDir, "agent"),
        masterSocket: join(dataDir, "haproxy", "master.sock"),
        canary: false,
      },
    ];
  const names = Array.from({ length: count }, (_, i) => `node-${i + 1}`);
  const [first] = admissionOrder(names);
  return names.map((name, i) => ({
    name,
    address: `127.0.1.${i + 1}`,
    configPath: join(dataDir, name, "haproxy", "haproxy.cfg"),
    stateDir: join(dataDir, name, "agent"),
    masterSocket: join(dataDir, name, "haproxy", "master.sock"),
    canary: name === first,
  }));
}

/**
 * The render settings of the stack's config: one node binds 127.0.0.1 and keeps its sockets in
 * haproxy/, as it always did; several take their address and their directory from HAProxy's
 * environment, set by each agent.
 */
export function nodeRenderEnv(dataDir: string, count: number): Record<string, string> {
  if (count === 1)
    return {
      SERVICELB_BIND_ADDRESS: "127.0.0.1",
      SERVICELB_STATS_SOCKET: join(dataDir, "haproxy", "admin.sock"),
      SERVICELB_SERVER_STATE_FILE: join(dataDir, "haproxy", "server-state"),
    };
  return {
    SERVICELB_BIND_ADDRESS: `\${${NODE_ADDRESS_VARIABLE}}`,
    SERVICELB_STATS_BIND: `\${${NODE_ADDRESS_VARIABLE}}`,
    SERVICELB_STATS_SOCKET: `\${${CONFIG_DIR_VARIABLE}}/admin.sock`,
    SERVICELB_SERVER_STATE_FILE: `\${${CONFIG_DIR_VARIABLE}}/server-state`,
  };
}

/**
 * Canary rollouts for several nodes, set for watching: the canary, then every node, each wave
 * baking 20 s and judged from 20 requests. A setting in the stack's own environment wins.
 */
export function stackCanaryEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const defaults: Record<string, string> = {
    SERVICELB_CANARY: "true",
    SERVICELB_CANARY_WAVES: "1,100%",
    SERVICELB_CANARY_BAKE_MS: "20000",
    SERVICELB_CANARY_MIN_REQUESTS: "20",
    SERVICELB_CANARY_DEADLINE_MS: "120000",
  };
  return Object.fromEntries(Object.entries(defaults).map(([k, v]) => [k, env[k] ?? v]));
}

/** The banner's HAProxy lines: where each node serves, or why it does not. */
export function nodeLines(
  nodes: readonly StackNode[],
  served: readonly HaproxyState[] | undefined,
  ports: { http: number; stats: number; agent: number },
  canary: Record<string, string>,
): string[] {
  if (!served)
    return [
      "  HAProxy          not installed: `apt-get install -y haproxy`, then npm start again (everything else runs)",
    ];
  const line = (n: StackNode, state: HaproxyState) => {
    const agent = `agent http://${n.address}:${ports.agent}/status`;
    return state.listening
      ? `http://${n.address}:${ports.http}/   stats http://${n.address}:${ports.stats}/   ${agent}`
      : `NOT LISTENING: ${state.reason}; ${agent}`;
  };
  if (nodes.length === 1) return [`  HAProxy          ${line(nodes[0]!, served[0]!)}`];
  const bakeS = Number(canary.SERVICELB_CANARY_BAKE_MS) / 1000;
  return [
    `  nodes            ${nodes.length} agents, each with its own HAProxy on its own address, running one published config:`,
    ...nodes.map((n, i) => `    ${`${n.name}${n.canary ? " (canary)" : ""}`.padEnd(18)}${line(n, served[i]!)}`),
    `  rollouts         a change that needs a reload goes out in waves ${canary.SERVICELB_CANARY_WAVES}, each baking ${bakeS} s and judged from ${canary.SERVICELB_CANARY_MIN_REQUESTS} requests; \`status\` below shows each node's wave and the gate figures`,
  ];
}
