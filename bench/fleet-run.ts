/*
 * A fleet on this machine: s3rver behind the counting proxy (store-proxy.ts), N agents in this
 * process (fleet-agents.ts) and the reconcile function's reconciler (fleet-publisher.ts). A change
 * is measured from the moment its config is stored to the moment each agent applied it, with what
 * each agent asked of the store meanwhile, how it got the config, and what failed.
 */

import { ListObjectsV2Command } from "@aws-sdk/client-s3";
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ReconcileResult } from "../shared/app/pass.js";
import { waitFor } from "../test/support/net.js";
import { startS3, type TestS3 } from "../test/support/s3.js";
import { type AgentEvent, type FleetAgentsSettings, type FleetState, startFleetAgents } from "./fleet-agents.js";
import type { HostMessage, HostRequest } from "./fleet-host.js";
import { type FleetPublisher, fleetPublisher } from "./fleet-publisher.js";
import { seeded } from "./machine.js";
import { type StoreProxy, startStoreProxy, type Traffic, trafficBetween } from "./store-proxy.js";

export const FLEET_TOKEN = "fleet-notify-token-0123456789";
const FUNCTION = "function";

export interface FleetOptions {
  agents: number;
  services: number;
  /** Injected per store request; none by default. */
  latencyMs?: { min: number; max: number };
  slowDownRate?: number;
  /** The agents' --poll-interval, e.g. "30s". */
  pollInterval: string;
  statusInterval: string;
  /** Where the agents' files go (tmpfs: each real node has a disk of its own). */
  dir: string;
  /** Seeds the proxy's latencies and faults. */
  seed?: number;
  /** Processes the agents are spread over (fleet-host.ts); 0: this one. */
  hosts?: number;
}

export interface AgentOutcome {
  node: string;
  /** From the config stored to this agent's apply of it, ms; undefined: not applied. */
  appliedMs?: number;
  how?: string;
  /** It was not pinged, or the pull its ping started did not bring the config: a poll did. */
  rescuedByPoll: boolean;
  traffic: Traffic;
}

export interface ChangeOutcome {
  key: string;
  /** The pass: publish, then pings. */
  pass: ReconcileResult;
  /** From the pass's start to its config stored, and the pings after it. */
  publishMs: number;
  notifyMs: number;
  agents: AgentOutcome[];
  /** What the function asked of the store for this change. */
  functionTraffic: Traffic;
  /** Store failures the agents counted (after the SDK's own retry) during the change. */
  escapedErrors: number;
  /** Passes that failed and were run again (a Broker redelivers a failed event). */
  failedPasses: number;
}

export interface Fleet {
  store: TestS3;
  proxy: StoreProxy;
  storeUrl: string;
  /** What every agent runs, and what their fake HAProxies did. */
  state(): Promise<FleetState>;
  /** The first publish, and every agent's first apply of it. */
  initial: ChangeOutcome;
  /** Moves an endpoint and waits until every agent applied it, or `waitMs` passed. */
  change(waitMs: number): Promise<ChangeOutcome>;
  stop(): Promise<void>;
}

/** The agents, wherever they run. */
interface Members {
  urls: string[];
  state(): Promise<FleetState>;
  stop(): Promise<void>;
}

async function inProcess(
  settings: FleetAgentsSettings,
  endpoints: Record<string, string>,
  onEvent: (e: AgentEvent) => void,
): Promise<Members> {
  const fleet = await startFleetAgents({ ...settings, endpointOf: async (node) => endpoints[node]!, onEvent });
  return { urls: [...fleet.agents.values()].map((a) => a.url), state: () => fleet.state(), stop: () => fleet.stop() };
}

/** Every `hosts`-th node to each of `hosts` processes. */
async function hosted(
  hosts: number,
  settings: FleetAgentsSettings,
  endpoints: Record<string, string>,
  onEvent: (e: AgentEvent) => void,
): Promise<Members> {
  const script = join(fileURLToPath(new URL(".", import.meta.url)), "fleet-host.js");
  let queries = 0;
  const children = Array.from({ length: hosts }, (_, h) => {
    const child = fork(script, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    const waiting = new Map<number | string, (m: HostMessage) => void>();
    child.on("message", (m: HostMessage) => {
      if (m.type === "events") for (const e of m.events) onEvent(e);
      else waiting.get(m.type === "state" ? m.id : m.type)?.(m);
    });
    const ask = (request: HostRequest, answer: number | string) =>
      new Promise<HostMessage>((resolve) => {
        waiting.set(answer, resolve);
        child.send(request);
      });
    const nodes = settings.nodes.filter((_, i) => i % hosts === h);
    return { child, ask, settings: { ...settings, nodes } };
  });
  const started = await Promise.all(
    children.map((c) => c.ask({ type: "start", settings: c.settings, endpoints }, "started")),
  );
  const urls = started.flatMap((m) => (m.type === "started" ? Object.values(m.urls) : []));
  return {
    urls,
    async state() {
      const id = ++queries;
      const states = await Promise.all(children.map((c) => c.ask({ type: "query", id }, id)));
      const merged: FleetState = {
        applied: {},
        escapedErrors: 0,
        counts: { starts: 0, reloads: 0, checksAsked: 0, checksRun: 0, runtimeCommands: 0, patternSwaps: 0 },
        hosts: [],
      };
      for (const s of states) {
        if (s.type !== "state") continue;
        merged.hosts!.push(...(s.hosts ?? []));
        Object.assign(merged.applied, s.applied);
        merged.escapedErrors += s.escapedErrors;
        for (const k of Object.keys(merged.counts) as Array<keyof FleetState["counts"]>)
          merged.counts[k] += s.counts[k];
      }
      return merged;
    },
    async stop() {
      await Promise.all(children.map((c) => c.ask({ type: "stop" }, "stopped")));
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A status report is written a second after an apply (status-report.ts): counted with its change. */
const REPORT_SETTLE_MS = 1500;

export async function startFleet(o: FleetOptions): Promise<Fleet> {
  const store = await startS3("fleet");
  const proxy = await startStoreProxy({
    target: store.endpoint,
    latencyMs: o.latencyMs,
    slowDownRate: o.slowDownRate,
    random: seeded(o.seed ?? 1),
  });
  const storeUrl = `s3://${store.bucket}/fleet`;
  const nodes = Array.from({ length: o.agents }, (_, i) => `node-${String(i).padStart(4, "0")}`);
  const root = mkdtempSync(join(o.dir, "fleet-"));
  let listener: ((e: AgentEvent) => void) | undefined;
  let published: { key: string; at: number } | undefined;
  // The function publishes once before any agent runs, so that agents start onto a config.
  let publisher: FleetPublisher | undefined;
  const makePublisher = async (agents: string[]) =>
    fleetPublisher({
      services: o.services,
      store: storeUrl,
      endpoint: await proxy.endpointFor(FUNCTION),
      agents,
      token: FLEET_TOKEN,
      dir: root,
      onPublished: (key, at) => (published = { key, at }),
    });
  const first = await makePublisher([]);
  const firstPass = await first.publish();
  await first.close();
  const firstPublished = published!;

  const collected: AgentEvent[] = [];
  listener = (e) => collected.push(e);
  const beforeStart = proxy.traffic();
  const endpoints: Record<string, string> = {};
  for (const node of nodes) endpoints[node] = await proxy.endpointFor(node);
  const settings: FleetAgentsSettings = {
    nodes,
    store: storeUrl,
    dir: join(root, "agents"),
    token: FLEET_TOKEN,
    pollInterval: o.pollInterval,
    statusInterval: o.statusInterval,
  };
  const onEvent = (e: AgentEvent) => listener?.(e);
  const agents = o.hosts
    ? await hosted(o.hosts, settings, endpoints, onEvent)
    : await inProcess(settings, endpoints, onEvent);
  // Each agent reports what it reads (status/<node>.json) a second after its first apply; the
  // function the changes are published by reads the reports at its first pass, and publishes in
  // chunks only once every one of them says chunks1.
  await waitFor(
    `${o.agents} agents' reports`,
    async () => {
      const listed = await store.client.send(
        new ListObjectsV2Command({ Bucket: store.bucket, Prefix: "fleet/status/" }),
      );
      return (listed.KeyCount ?? 0) >= o.agents ? true : undefined;
    },
    120_000,
  );
  publisher = await makePublisher(agents.urls);
  // A pass over the cluster as it is (nothing to publish): the function reads the reports beside
  // it, so the changes after it publish as the fleet reads them (in chunks) from the first one.
  await publisher.publish();

  /** `pinged`: the change was announced by pings (the first config is found by each agent's start). */
  async function outcomes(
    key: string,
    events: AgentEvent[],
    since: number,
    before: Map<string, Traffic>,
    pinged: boolean,
  ) {
    const traffic = trafficBetween(before, proxy.traffic());
    return nodes.map((node): AgentOutcome => {
      const mine = events.filter((e) => e.node === node);
      const applied = mine.find((e) => e.ev === "applied" && e.key === key);
      const notified = mine.findIndex((e) => e.ev === "notify" && e.key === key);
      const pullsAfterPing =
        notified < 0 || !applied
          ? 0
          : mine.slice(notified).filter((e) => e.ev === "pull.start" && e.at <= applied.at).length;
      return {
        node,
        appliedMs: applied && applied.at - since,
        how: applied?.how,
        rescuedByPoll: pinged && applied !== undefined && (notified < 0 || pullsAfterPing > 1),
        traffic: traffic.get(node)!,
      };
    });
  }

  const initialAgents = await outcomes(firstPublished.key, collected, firstPublished.at, beforeStart, false);
  const initial: ChangeOutcome = {
    key: firstPublished.key,
    pass: firstPass,
    publishMs: firstPass.durationsMs?.publish ?? NaN,
    notifyMs: 0,
    agents: initialAgents,
    functionTraffic: proxy.traffic().get(FUNCTION)!,
    escapedErrors: (await agents.state()).escapedErrors,
    failedPasses: 0,
  };

  return {
    store,
    proxy,
    storeUrl,
    state: () => agents.state(),
    initial,
    async change(waitMs) {
      const events: AgentEvent[] = [];
      const waiting = new Set(nodes);
      let key: string | undefined;
      let done: () => void = () => undefined;
      const allApplied = new Promise<void>((resolve) => (done = resolve));
      const pending: AgentEvent[] = [];
      listener = (e) => {
        events.push(e);
        if (e.ev !== "applied") return;
        if (key === undefined) pending.push(e);
        else if (e.key === key && waiting.delete(e.node) && waiting.size === 0) done();
      };
      const before = proxy.traffic();
      const errorsBefore = (await agents.state()).escapedErrors;
      published = undefined;
      const started = performance.timeOrigin + performance.now();
      let pass: ReconcileResult | undefined;
      let failedPasses = 0;
      while (pass === undefined) {
        try {
          pass = await publisher!.moveEndpoint();
        } catch {
          failedPasses++;
        }
      }
      const stored = published ?? { key: pass.key!, at: started };
      key = stored.key;
      for (const e of pending) if (e.key === key) waiting.delete(e.node);
      if (waiting.size > 0) await Promise.race([allApplied, sleep(waitMs)]);
      await sleep(REPORT_SETTLE_MS);
      const outcome: ChangeOutcome = {
        key,
        pass,
        publishMs: stored.at - started,
        notifyMs: pass.durationsMs?.notify ?? NaN,
        agents: await outcomes(key, events, stored.at, before, true),
        functionTraffic: trafficBetween(before, proxy.traffic()).get(FUNCTION)!,
        escapedErrors: (await agents.state()).escapedErrors - errorsBefore,
        failedPasses,
      };
      listener = undefined;
      return outcome;
    },
    async stop() {
      await agents.stop();
      await publisher?.close();
      await proxy.stop();
      await store.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
