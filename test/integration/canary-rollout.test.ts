import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import { type Agent, startAgent } from "../../shared/agent/agent.js";
import type { FunctionSettings } from "../../shared/app/function-options.js";
import { createReconciler } from "../../shared/app/reconcile.js";
import { createRolloutGates } from "../../shared/app/rollout-gates.js";
import type { RenderOptions } from "../../shared/core/settings/options.js";
import { type Kind, KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { describeRollout } from "../../shared/app/rollout-command.js";
import type { RolloutSettings } from "../../shared/core/rollout/rollout.js";
import { rolloutTarget } from "../../shared/core/rollout/rollout-record.js";
import { DEFAULT_THRESHOLDS } from "../../shared/core/rollout/gate.js";
import { admissionOrder, parseWaves } from "../../shared/core/rollout/waves.js";
import { fakeHaproxy } from "../../bench/fake-haproxy.js";
import { readFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { A, agentWorld, B, C, type Node, TOKEN, web } from "../support/agent.js";
import { waitFor } from "../support/net.js";

/*
 * A canary rollout over three agents sharing one store, through the function's rollout runner
 * (app/rollout-gates.ts, the step every reconcile pass takes, here on a 250 ms tick as PingSource
 * would send them) and the agents' own pull loop with --canary. The canary node runs a real
 * HAProxy that serves real traffic, whose `show stat` counters the gate judges. The two other
 * nodes run the real agent with HAProxy faked (bench/fake-haproxy.ts): one config listens on the
 * same ports on every node, so a second real HAProxy on this machine would need a network
 * namespace of its own. They carry no traffic, so the canary is judged against a control that
 * answered no 5xx, and "0 extra 5xx" on them is shown by their never running the bad config.
 */

const world = agentWorld();
const log = createLogger("canary-test", process.env.AGENT_TEST_LOG ?? "silent");
const NAMES = ["edge-a", "edge-b", "edge-c"];
const [CANARY, ...OTHERS] = admissionOrder(NAMES) as [string, string, string];
const BAKE_MS = 4000;
const settings: RolloutSettings = {
  waves: parseWaves("1,100%"),
  bakeMs: BAKE_MS,
  deadlineMs: 20_000,
  fallback: "hold",
  convergeMs: 15_000,
  thresholds: { ...DEFAULT_THRESHOLDS, minRequests: 20 },
};
const AGENT_FLAGS = { canary: true, pollInterval: "300ms", statusInterval: "400ms" };

interface Fleet {
  node: Node;
  agents: Record<string, Agent>;
  /** Every key each node reported running, in order. */
  ran: Record<string, string[]>;
  /**
   * Steps rollout.json as a reconcile pass does, every 250 ms, until stopped; `fresh`: each step by
   * a new runner, as if the function instance were replaced at every pass.
   */
  ticking(fresh?: boolean): { stop(): Promise<void> };
  /** Requests through the canary's HAProxy, every 15 ms, by path and status. */
  traffic(paths: string[]): { stop(): Promise<Record<string, Record<number, number>>> };
}

async function fleet(bakeMs = BAKE_MS): Promise<Fleet> {
  const node = await world.node();
  const fake = fakeHaproxy();
  const agents: Record<string, Agent> = {};
  agents[CANARY] = await world.start(node, { ...AGENT_FLAGS, nodeName: CANARY });
  for (const name of OTHERS) {
    const dir = join(node.dir, name);
    const agent = await startAgent(
      node.options({
        ...AGENT_FLAGS,
        nodeName: name,
        configPath: join(dir, "haproxy.cfg"),
        stateDir: join(dir, "state"),
        masterSocket: join(dir, "master.sock"),
      }),
      { log, store: node.store, haproxyPorts: fake.ports(), backoff: { initialMs: 60_000, maxMs: 60_000 } },
    );
    world.cleanups.push(() => agent.stop());
    agents[name] = agent;
  }
  const ran: Record<string, string[]> = Object.fromEntries(NAMES.map((n) => [n, []]));
  const watch = setInterval(() => {
    for (const name of NAMES) {
      const key = agents[name]!.status().applied?.key;
      if (key && ran[name]!.at(-1) !== key) ran[name]!.push(key);
    }
  }, 20);
  world.cleanups.push(() => clearInterval(watch));
  const gates = createRolloutGates(node.store, { ...settings, bakeMs }, log);
  return {
    node,
    agents,
    ran,
    ticking(fresh = false) {
      let stopped = false;
      const loop = (async () => {
        while (!stopped) {
          // A failed step fails the pass, and the next tick runs another, as the Broker would retry.
          const { config } = await node.store.newest();
          const runner = fresh ? createRolloutGates(node.store, { ...settings, bakeMs }, log) : gates;
          if (config) await runner.step(config).catch((err: unknown) => log.warn({ err }, "rollout step failed"));
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      return {
        async stop() {
          stopped = true;
          await loop;
        },
      };
    },
    traffic(paths) {
      let stopped = false;
      const counts: Record<string, Record<number, number>> = Object.fromEntries(paths.map((p) => [p, {}]));
      const loop = (async () => {
        while (!stopped) {
          for (const path of paths) {
            const { status } = await node.get(path).catch(() => ({ status: 0 }));
            counts[path]![status] = (counts[path]![status] ?? 0) + 1;
          }
          await new Promise((r) => setTimeout(r, 15));
        }
      })();
      return {
        async stop() {
          stopped = true;
          await loop;
          return counts;
        },
      };
    },
  };
}

/** Every node runs `key`, by its own status and by its report in the store (what the gates read). */
async function allRun(f: Fleet, key: string): Promise<void> {
  await waitFor(
    `every node runs ${key}`,
    async () => (NAMES.every((n) => f.agents[n]!.status().applied?.key === key) ? true : undefined),
    15_000,
  );
  await waitFor(
    `every node reports ${key}`,
    async () => {
      const reports = (await f.node.store.listStatuses().catch(() => [])) as Array<{
        node?: string;
        applied?: { key?: string };
      }>;
      return NAMES.every((n) => reports.some((r) => r.node === n && r.applied?.key === key)) ? true : undefined;
    },
    15_000,
  );
}

/** The cluster: Services web (pod A) and shop (pod B). */
const cluster = () => [...web("web", world.pods.port, [A]), ...web("shop", world.pods.port, [B])];

describe("canary rollout over three agents", () => {
  it("keeps a config that answers 5xx for one Service on the canary, rolls it back within the bake time, and no other node runs it", async () => {
    const f = await fleet();
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking();
    await allRun(f, good.key);
    // Valid (haproxy -c passes it) and wrong: shop answers 500, as a broken template line would make it.
    const badText = f.node
      .lastConfig()
      .replace(/^(backend default_shop_80\b.*)$/m, "$1\n    http-request deny deny_status 500");
    expect(badText).not.toBe(f.node.lastConfig());
    const traffic = f.traffic(["/web/", "/shop/"]);
    const bad = await f.node.store.publish({ config: badText, revision: "101", generator: "servicelb/test" });
    const published = Date.now();
    await waitFor("the canary runs the bad config", async () => (f.ran[CANARY]!.includes(bad.key) ? true : undefined));
    await waitFor(
      "the rollout failed",
      async () => ((await f.node.store.getRollout())?.rollout?.state === "failed" ? true : undefined),
      BAKE_MS + 10_000,
    );
    await waitFor("the canary is back on the good config", async () =>
      f.agents[CANARY]!.status().applied?.key === good.key ? true : undefined,
    );
    const rolledBackMs = Date.now() - published;
    await new Promise((r) => setTimeout(r, 300));
    const counts = await traffic.stop();
    await tick.stop();

    expect(rolledBackMs).toBeLessThan(BAKE_MS + 10_000);
    // Only the canary ever ran the bad config.
    expect(f.ran[CANARY]).toEqual([good.key, bad.key, good.key]);
    for (const other of OTHERS) expect(f.ran[other]).toEqual([good.key]);
    // web was never hurt; shop failed on the canary while it ran the bad config, and serves again.
    expect(Object.keys(counts["/web/"]!)).toEqual(["200"]);
    expect(counts["/shop/"]![500]).toBeGreaterThan(0);
    expect((await f.node.get("/shop/")).status).toBe(200);
    const record = (await f.node.store.getRollout())!;
    expect(NAMES.map((n) => rolloutTarget(record, n).key)).toEqual([good.key, good.key, good.key]);
    // The gate names the broken Service: on its own once it has enough requests, else as the
    // source of the errors of all backends together.
    expect(record.rollout?.reason).toMatch(
      /5xx rate [\d.]+% on the canary .*default_shop_80|^default_shop_80: 5xx rate 100\.00%/,
    );
    expect(record.history.at(-1)).toMatchObject({ key: bad.key, outcome: "rolled back" });
    const shop = record.history.at(-1)?.gate?.backends.find((b) => b.backend === "default_shop_80");
    expect(shop?.canary.errors).toBe(shop?.canary.requests);
    expect(record.history.at(-1)?.gate?.backends.find((b) => b.backend === "default_web_80")?.canary.errors).toBe(0);
    expect(describeRollout(record)).toMatch(/state {6}failed: .*5xx rate/);
  }, 60_000);

  it("takes a good structural change to every node after the waves, the canary first, with the function instance replaced at every pass", async () => {
    const f = await fleet();
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking(true);
    await allRun(f, good.key);
    const traffic = f.traffic(["/web/", "/shop/"]);
    const next = await f.node.publish([...cluster(), ...web("api", world.pods.port, [A])], 101);
    const published = Date.now();
    await allRun(f, next.key);
    // The last wave admits every node, and bakes too before the candidate is the stable config.
    await waitFor(
      "the rollout done",
      async () => ((await f.node.store.getRollout())?.stable.key === next.key ? true : undefined),
      3 * BAKE_MS + 10_000,
    );
    const doneMs = Date.now() - published;
    const counts = await traffic.stop();
    await tick.stop();
    const record = (await f.node.store.getRollout())!;
    expect(record).toMatchObject({ stable: { key: next.key }, rollout: null });
    expect(record.history.at(-1)).toMatchObject({ key: next.key, outcome: "promoted" });
    expect(f.ran[CANARY]).toEqual([good.key, next.key]);
    for (const other of OTHERS) expect(f.ran[other]).toEqual([good.key, next.key]);
    expect(Object.keys(counts["/web/"]!)).toEqual(["200"]);
    expect(Object.keys(counts["/shop/"]!)).toEqual(["200"]);
    // Two waves of BAKE_MS each, and the time to converge and report.
    expect(doneMs).toBeGreaterThanOrEqual(2 * BAKE_MS);
    log.info({ doneMs }, "good change on every node");
  }, 60_000);

  it("takes an endpoint change made during a rollout to every node at once, each on the config it runs", async () => {
    const f = await fleet(60_000);
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking();
    await allRun(f, good.key);
    const api = web("api", world.pods.port, [A]);
    const next = await f.node.publish([...cluster(), ...api], 101);
    await waitFor("the canary runs the candidate", async () => (f.ran[CANARY]!.at(-1) === next.key ? true : undefined));
    // shop's pod moves from B to C while the first wave bakes (for a minute).
    const moved = await f.node.publish(
      [...web("web", world.pods.port, [A]), ...web("shop", world.pods.port, [C]), ...api],
      102,
    );
    const published = Date.now();
    await world.served(f.node, "/shop/", "C");
    await waitFor("every node runs shop on C", async () =>
      OTHERS.every((n) => {
        const key = f.agents[n]!.status().applied?.key ?? "";
        return (
          key.includes("/tracks/") &&
          /server \S+ 127\.0\.0\.4:/.test(readFileSync(join(f.node.dir, n, "haproxy.cfg"), "utf8"))
        );
      })
        ? true
        : undefined,
    );
    const everywhereMs = Date.now() - published;
    await tick.stop();
    log.info({ everywhereMs }, "endpoint change on every node during a rollout");
    const record = (await f.node.store.getRollout())!;
    // At once: still the first wave (it bakes for a minute); the canary runs the candidate with the
    // move, the others the stable config with it.
    expect(record.rollout).toMatchObject({ state: "rolling", wave: 0, candidate: { key: moved.key } });
    expect(f.agents[CANARY]!.status().applied).toMatchObject({ key: moved.key, how: "runtime" });
    for (const n of OTHERS) {
      expect(f.agents[n]!.status().applied).toMatchObject({ key: record.stable.key, how: "runtime" });
      // The stable structure: no api backend on them yet.
      expect(readFileSync(join(f.node.dir, n, "haproxy.cfg"), "utf8")).not.toMatch(/backend default_api_80/);
    }
  }, 60_000);

  it("runs from the reconcile function's passes: its first pass writes rollout.json, a new instance's settings change rolls out wave by wave on its resyncs", async () => {
    const f = await fleet();
    const api = await new KubeApiEmulator().start();
    world.cleanups.push(() => api.stop());
    for (const item of cluster()) api.upsert((item as { kind: Kind }).kind, item as KubeObject);
    const kubeconfig = await api.writeKubeconfig({ dir: mkdtempSync(join(tmpdir(), "servicelb-kube-")) });
    /** A function instance with canary on; another render option is another deployment of it. */
    const instance = (options: Partial<RenderOptions> = {}) => {
      const fs: FunctionSettings = {
        options: { ...f.node.lb.options, ...options },
        kubeconfig,
        maxBodyBytes: 1 << 20,
        passTimeoutMs: 30_000,
        confirmDelayMs: 0,
        digest: "sha256",
        store: { url: `s3://${world.s3.bucket}/${f.node.prefix}`, endpoint: world.s3.endpoint, forcePathStyle: true },
        notify: {
          agents: NAMES.map((n) => f.agents[n]!.url),
          agentPort: "agent",
          token: TOKEN,
          timeoutMs: 2000,
          concurrency: 8,
          deadlineMs: 5000,
        },
        canary: settings,
      };
      return createReconciler(fs, { log, store: f.node.store });
    };
    const first = await instance().reconcileNow({ id: "first", type: "test" });
    expect(first.status).toBe("published");
    expect((await f.node.store.getRollout())?.stable.key).toBe(first.key);
    await allRun(f, first.key!);
    const traffic = f.traffic(["/web/", "/shop/"]);
    // A new deployment of the function with another balance algorithm: a change that needs a reload.
    const second = instance({ balanceAlgorithm: "leastconn" });
    const changed = await second.reconcileNow({ id: "leastconn", type: "test" });
    expect(changed.status).toBe("published");
    const started = (await f.node.store.getRollout())!;
    expect(started.rollout).toMatchObject({ state: "rolling", wave: 0, candidate: { key: changed.key } });
    // The PingSource's ticks: each pass steps the rollout.
    await waitFor(
      "the rollout done",
      async () => {
        await second.reconcileNow({ id: "tick", type: "dev.knative.sources.ping" });
        return (await f.node.store.getRollout())?.stable.key === changed.key ? true : undefined;
      },
      4 * BAKE_MS + 15_000,
    );
    await allRun(f, changed.key!);
    const counts = await traffic.stop();
    expect(f.ran[CANARY]).toEqual([first.key, changed.key]);
    for (const other of OTHERS) expect(f.ran[other]).toEqual([first.key, changed.key]);
    expect(Object.keys(counts["/shop/"]!)).toEqual(["200"]);
  }, 90_000);
});
