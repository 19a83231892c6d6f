import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import type { FunctionSettings } from "../../shared/app/function-options.js";
import { createReconciler } from "../../shared/app/reconcile.js";
import { describeRollout } from "../../shared/app/rollout-command.js";
import { type Kind, KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { DEFAULT_THRESHOLDS } from "../../shared/core/rollout/gate.js";
import type { RolloutSettings } from "../../shared/core/rollout/rollout.js";
import { rolloutTarget } from "../../shared/core/rollout/rollout-record.js";
import { parseWaves } from "../../shared/core/rollout/waves.js";
import type { RenderOptions } from "../../shared/core/settings/options.js";
import { A, agentWorld, B, C, TOKEN, web } from "../support/agent.js";
import { type Counts, canaryFleet, type Fleet } from "../support/canary-fleet.js";
import { waitFor } from "../support/net.js";

/*
 * A canary rollout over three nodes on this machine, each an agent with its own real HAProxy on its
 * own loopback address, all running one published config (test/support/canary-fleet.ts), through
 * the function's rollout runner (app/rollout-gates.ts, the step every reconcile pass takes, here on
 * a 250 ms tick as PingSource would send them) and the agents' own pull loop with --canary. Traffic
 * goes through every node's HAProxy: the gate judges the canary's `show stat` counters against the
 * other nodes', and what each node served is counted by node.
 */

const world = agentWorld();
const log = createLogger("canary-test", process.env.AGENT_TEST_LOG ?? "silent");
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

const fleet = (bakeMs = BAKE_MS): Promise<Fleet> => canaryFleet(world, { ...settings, bakeMs }, AGENT_FLAGS);

/** The statuses a node answered a path with, in order. */
const statuses = (counts: Counts, node: string, path: string) => Object.keys(counts[node]![path]!);

/** The cluster: Services web (pod A) and shop (pod B). */
const cluster = () => [...web("web", world.pods.port, [A]), ...web("shop", world.pods.port, [B])];

describe("canary rollout over three nodes, each with its own HAProxy", () => {
  it("keeps a config that answers 5xx for one Service on the canary, rolls it back within the bake time, and no other node runs it or serves an extra 5xx", async () => {
    const f = await fleet();
    const { canary, others } = f;
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking();
    await f.allRun(good.key);
    // Valid (haproxy -c passes it) and wrong: shop answers 500, as a broken template line would make it.
    const badText = f.node
      .lastConfig()
      .replace(/^(backend default_shop_80\b.*)$/m, "$1\n    http-request deny deny_status 500");
    expect(badText).not.toBe(f.node.lastConfig());
    const traffic = f.traffic(["/web/", "/shop/"]);
    const bad = await f.node.store.publish({ config: badText, revision: "101", generator: "servicelb/test" });
    const published = Date.now();
    await waitFor("the canary runs the bad config", async () => (f.ran[canary]!.includes(bad.key) ? true : undefined));
    await waitFor(
      "the rollout failed",
      async () => ((await f.node.store.getRollout())?.rollout?.state === "failed" ? true : undefined),
      BAKE_MS + 10_000,
    );
    await waitFor("the canary is back on the good config", async () =>
      f.agents[canary]!.status().applied?.key === good.key ? true : undefined,
    );
    const rolledBackMs = Date.now() - published;
    await new Promise((r) => setTimeout(r, 300));
    const counts = await traffic.stop();
    await tick.stop();

    expect(rolledBackMs).toBeLessThan(BAKE_MS + 10_000);
    // Only the canary ever ran the bad config.
    expect(f.ran[canary]).toEqual([good.key, bad.key, good.key]);
    for (const other of others) expect(f.ran[other]).toEqual([good.key]);
    // web was never hurt; shop failed on the canary while it ran the bad config, and serves again.
    for (const n of f.names) expect(statuses(counts, n, "/web/"), n).toEqual(["200"]);
    expect(statuses(counts, canary, "/shop/")).toEqual(["200", "500"]);
    expect((await f.get(canary, "/shop/")).status).toBe(200);
    // The other nodes served shop throughout: not one 5xx more than before.
    for (const other of others) {
      expect(statuses(counts, other, "/shop/"), other).toEqual(["200"]);
      expect(counts[other]!["/shop/"]![200]).toBeGreaterThan(20);
    }
    const record = (await f.node.store.getRollout())!;
    expect(f.names.map((n) => rolloutTarget(record, n).key)).toEqual([good.key, good.key, good.key]);
    // The gate names the broken Service: on its own once it has enough requests, else as the
    // source of the errors of all backends together.
    expect(record.rollout?.reason).toMatch(
      /5xx rate [\d.]+% on the canary .*default_shop_80|^default_shop_80: 5xx rate 100\.00%/,
    );
    expect(record.history.at(-1)).toMatchObject({ key: bad.key, outcome: "rolled back" });
    const shop = record.history.at(-1)?.gate?.backends.find((b) => b.backend === "default_shop_80");
    expect(shop?.canary.errors).toBe(shop?.canary.requests);
    // Judged against the other nodes' own traffic, which answered no 5xx.
    expect(shop?.control).toMatchObject({ errors: 0, requests: expect.any(Number) });
    expect(shop!.control.requests).toBeGreaterThan(0);
    expect(record.history.at(-1)?.gate?.backends.find((b) => b.backend === "default_web_80")?.canary.errors).toBe(0);
    expect(describeRollout(record)).toMatch(/state {6}failed: .*5xx rate/);
  }, 60_000);

  it("takes a good structural change to every node after the waves, the canary first, with the function instance replaced at every pass", async () => {
    const f = await fleet();
    const { canary, others } = f;
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking(true);
    await f.allRun(good.key);
    const traffic = f.traffic(["/web/", "/shop/", "/api/"]);
    const next = await f.node.publish([...cluster(), ...web("api", world.pods.port, [A])], 101);
    const published = Date.now();
    // When each wave of this rollout started, by the rollout's own record, sampled while it runs.
    const waveStarted = new Map<number, number>();
    // Generous: under the whole suite's load (another worker building the package) a fresh runner per
    // pass took 2.4 times as long here; the waves' own timing is asserted from their records below.
    await waitFor(
      `every node runs ${next.key}`,
      async () => {
        const r = (await f.node.store.getRollout())?.rollout;
        if (r && r.candidate.key === next.key && !waveStarted.has(r.wave))
          waveStarted.set(r.wave, Date.parse(r.waveStartedAt));
        return f.names.every((n) => f.agents[n]!.status().applied?.key === next.key) ? true : undefined;
      },
      3 * BAKE_MS + 40_000,
    );
    // The last wave admits every node, and bakes too before the candidate is the stable config.
    await waitFor(
      "the rollout done",
      async () => ((await f.node.store.getRollout())?.stable.key === next.key ? true : undefined),
      3 * BAKE_MS + 40_000,
    );
    const doneMs = Date.now() - published;
    const counts = await traffic.stop();
    await tick.stop();
    const record = (await f.node.store.getRollout())!;
    expect(record).toMatchObject({ stable: { key: next.key }, rollout: null });
    expect(record.history.at(-1)).toMatchObject({ key: next.key, outcome: "promoted" });
    expect(f.ran[canary]).toEqual([good.key, next.key]);
    for (const other of others) expect(f.ran[other]).toEqual([good.key, next.key]);
    for (const n of f.names) {
      expect(statuses(counts, n, "/web/"), n).toEqual(["200"]);
      expect(statuses(counts, n, "/shop/"), n).toEqual(["200"]);
      // api: not found until the node ran the change, then served; nothing else.
      expect(statuses(counts, n, "/api/"), n).toEqual(["200", "404"]);
    }
    // The second wave started once the canary's had baked; the other nodes served the change only
    // after it started, the canary before them. (The traffic loop sees a node's first 200 up to a
    // round late under load, and the canary applies some time after its wave starts: the bake is
    // asserted between the waves' starts, not between the served times.)
    expect([...waveStarted.keys()]).toEqual([0, 1]);
    expect(waveStarted.get(1)! - waveStarted.get(0)!).toBeGreaterThanOrEqual(BAKE_MS);
    const servedApi = Object.fromEntries(f.names.map((n) => [n, traffic.first200[n]!["/api/"]!]));
    for (const other of others) {
      expect(servedApi[other]!, other).toBeGreaterThanOrEqual(waveStarted.get(1)!);
      expect(servedApi[other]!, other).toBeGreaterThan(servedApi[canary]!);
    }
    // Two waves of BAKE_MS each, and the time to converge and report.
    expect(doneMs).toBeGreaterThanOrEqual(2 * BAKE_MS);
    log.info({ doneMs, servedApi }, "good change on every node");
  }, 120_000);

  it("holds a change it has too little traffic to judge by the deadline, as the fallback says, and says why", async () => {
    const f = await canaryFleet(world, { ...settings, bakeMs: 1000, deadlineMs: 4000, fallback: "hold" }, AGENT_FLAGS);
    const { canary, others } = f;
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking();
    await f.allRun(good.key);
    // No client sends a request: the gate never has its 20.
    const next = await f.node.publish([...cluster(), ...web("api", world.pods.port, [A])], 101);
    await waitFor(
      "the rollout held",
      async () => ((await f.node.store.getRollout())?.rollout?.state === "held" ? true : undefined),
      15_000,
    );
    // Held, not promoted: a few more passes change nothing.
    await new Promise((r) => setTimeout(r, 1500));
    await tick.stop();
    const record = (await f.node.store.getRollout())!;
    expect(record.stable.key).toBe(good.key);
    expect(record.rollout).toMatchObject({ state: "held", wave: 0, candidate: { key: next.key } });
    expect(record.rollout?.reason).toMatch(
      /^too little traffic to judge by the deadline \(4 s\): .*held by the fallback until `servicelb rollout promote` or `abort`$/,
    );
    expect(f.ran[canary]).toEqual([good.key, next.key]);
    for (const other of others) expect(f.ran[other]).toEqual([good.key]);
    expect(describeRollout(record)).toMatch(/state {6}held: too little traffic to judge by the deadline/);
  }, 120_000);

  it("takes an endpoint change made during a rollout to every node at once, each on the config it runs", async () => {
    const f = await fleet(60_000);
    const { canary, others } = f;
    const good = await f.node.publish(cluster(), 100);
    const tick = f.ticking();
    await f.allRun(good.key);
    const api = web("api", world.pods.port, [A]);
    const next = await f.node.publish([...cluster(), ...api], 101);
    await waitFor("the canary runs the candidate", async () => (f.ran[canary]!.at(-1) === next.key ? true : undefined));
    // shop's pod moves from B to C while the first wave bakes (for a minute).
    const moved = await f.node.publish(
      [...web("web", world.pods.port, [A]), ...web("shop", world.pods.port, [C]), ...api],
      102,
    );
    const published = Date.now();
    // Through each node's own HAProxy: shop answered by C everywhere.
    const servedAt: Record<string, number> = {};
    await Promise.all(
      f.names.map((n) =>
        waitFor(`${n} serves shop from C`, async () => {
          const r = await f.get(n, "/shop/");
          if (r.status !== 200 || !r.body.startsWith("C ")) return undefined;
          servedAt[n] = Date.now() - published;
          return true;
        }),
      ),
    );
    const everywhereMs = Date.now() - published;
    // Served through the runtime API first, then written: each node's file and record follow.
    await waitFor("every node records shop on C", async () =>
      others.every(
        (n) =>
          (f.agents[n]!.status().applied?.key ?? "").includes("/tracks/") &&
          /server \S+ 127\.0\.0\.4:/.test(readFileSync(join(f.node.dir, n, "haproxy.cfg"), "utf8")),
      ) && f.agents[canary]!.status().applied?.key === moved.key
        ? true
        : undefined,
    );
    await tick.stop();
    log.info({ everywhereMs, servedAt }, "endpoint change on every node during a rollout");
    // At once: each within a few poll intervals, not after the minute the first wave bakes.
    expect(everywhereMs).toBeLessThan(10_000);
    const record = (await f.node.store.getRollout())!;
    // At once: still the first wave (it bakes for a minute); the canary runs the candidate with the
    // move, the others the stable config with it.
    expect(record.rollout).toMatchObject({ state: "rolling", wave: 0, candidate: { key: moved.key } });
    expect(f.agents[canary]!.status().applied).toMatchObject({ key: moved.key, how: "runtime" });
    for (const n of others) {
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
          agents: f.names.map((n) => f.agents[n]!.url),
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
    await f.allRun(first.key!);
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
    ).catch(async (err: Error) => {
      // Why it did not finish is in the record: the wave, the gate's figures, a hold's reason.
      throw new Error(`${err.message}; rollout.json: ${JSON.stringify(await f.node.store.getRollout())}`);
    });
    await f.allRun(changed.key!);
    const counts = await traffic.stop();
    expect(f.ran[f.canary]).toEqual([first.key, changed.key]);
    for (const other of f.others) expect(f.ran[other]).toEqual([first.key, changed.key]);
    for (const n of f.names) expect(statuses(counts, n, "/shop/"), n).toEqual(["200"]);
  }, 90_000);
});
