/*
 * A process that hosts a share of a fleet's agents (fleet-agents.ts), forked by fleet-run.ts so
 * that a large fleet spreads over the machine's cores. Over IPC: it starts its agents, streams
 * their trace events, answers what they run and how many store failures they counted, and stops.
 */

import {
  type AgentEvent,
  type FleetAgents,
  type FleetAgentsSettings,
  type FleetState,
  startFleetAgents,
} from "./fleet-agents.js";

/** What the fleet's process asks of a host. */
export type HostRequest =
  | { type: "start"; settings: FleetAgentsSettings; endpoints: Record<string, string> }
  | { type: "query"; id: number }
  | { type: "stop" };

export type HostMessage =
  | { type: "started"; urls: Record<string, string> }
  | { type: "events"; events: AgentEvent[] }
  | ({ type: "state"; id: number } & FleetState)
  | { type: "stopped" };

const send = (m: HostMessage) => process.send!(m);

/** Events go out in batches: a message per event would cost the host more than the event. */
const BATCH_MS = 10;

let fleet: FleetAgents | undefined;
let batch: AgentEvent[] = [];
let scheduled = false;

process.on("message", (m: HostRequest) => {
  void (async () => {
    if (m.type === "start") {
      fleet = await startFleetAgents({
        ...m.settings,
        endpointOf: async (node) => m.endpoints[node]!,
        onEvent: (e) => {
          batch.push(e);
          if (scheduled) return;
          scheduled = true;
          setTimeout(() => {
            send({ type: "events", events: batch });
            batch = [];
            scheduled = false;
          }, BATCH_MS);
        },
      });
      send({
        type: "started",
        urls: Object.fromEntries([...fleet.agents].map(([node, agent]) => [node, agent.url])),
      });
    } else if (m.type === "query") {
      const state = await fleet!.state();
      const MiB = 2 ** 20;
      const memory = process.memoryUsage();
      const host = {
        agents: fleet!.agents.size,
        rssMiB: Math.round(memory.rss / MiB),
        // maxRSS is in KiB.
        peakRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
        heapUsedMiB: Math.round(memory.heapUsed / MiB),
      };
      send({ type: "state", id: m.id, ...state, hosts: [host] });
    } else {
      await fleet?.stop();
      send({ type: "stopped" });
      process.disconnect();
    }
  })();
});
