import { spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent as HttpAgent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { haproxyAvailable } from "../shared/adapters/haproxy/check.js";
import { showProc } from "../shared/adapters/haproxy/master.js";
import { processAlive } from "../shared/adapters/haproxy/proc-info.js";
import { createObjectStore, type PublishResult } from "../shared/adapters/store.js";
import { RenderContext } from "../shared/app/render-context.js";
import { formatConfigName, parseConfigKey } from "../shared/core/publish/config-key.js";
import { snapshotFromDocuments } from "../shared/core/kubernetes/snapshot.js";
import { echoPods, httpGet, web } from "../test/support/agent.js";
import { list } from "../test/support/fixtures.js";
import { loopbackOptions } from "../test/support/haproxy.js";
import { freePort } from "../test/support/net.js";
import { podName, ROLLOUT_PODS, rolloutSteps, runRollout, type RolloutResult } from "../test/support/rollout.js";
import { S3RVER_CREDENTIALS, startS3 } from "../test/support/s3.js";
import { fillerCluster, spawnAgent } from "./agent-process.js";
import { arg, machine, mib, table, percentile } from "./machine.js";

/**
 * bench/agent: the node agent as it runs on a node (its own process, dist/functions/agent.js),
 * with a real HAProxy and s3rver on loopback.
 *   - notify → served: from POST /notify until the new backend (structural change, a reload)
 *     or the new endpoint (endpoint-only change, runtime API) answers through HAProxy;
 *   - failed requests across R structural reloads under keep-alive and new-connection load, and
 *     beside it the same for the original's `haproxy -D -sf` reloads (the anchor);
 *   - failed requests across a rollout of 100 endpoint changes under the same load (runtime API,
 *     make before break; test/support/rollout.ts);
 *   - the agent's RSS.
 * The cluster is N Services × 10 endpoints; the filler endpoints are loopback addresses on a
 * closed port (health checks fail fast, nothing leaves the machine).
 *   node dist/dev/bench/agent.js [--services 1000] [--iterations 30] [--reloads 50] [--json]
 */

const ENDPOINTS = 10;
const A = "127.0.0.2";
const B = "127.0.0.3";
const TOKEN = "bench-token";

const round = (ms: number) => Math.round(ms * 10) / 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cluster = (services: number, closedPort: number, extra: unknown[]) =>
  fillerCluster(services, ENDPOINTS, closedPort, extra);

function rssKiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: field("VmRSS"), peak: field("VmHWM") };
}

async function main(): Promise<void> {
  const services = arg("--services", 1000);
  const iterations = arg("--iterations", 30);
  const reloadCount = arg("--reloads", 50);
  const haproxyVersion = await haproxyAvailable();
  if (!haproxyVersion) throw new Error("haproxy is not installed: apt-get install -y haproxy");

  const s3 = await startS3();
  const pods = await echoPods({ [A]: "A", [B]: "B" });
  const rollPods = await echoPods(Object.fromEntries(ROLLOUT_PODS.map((ip) => [ip, podName(ip)])));
  const lb = await loopbackOptions({ checkInterval: "2s", hardStopAfter: "5m" });
  const dir = mkdtempSync(join(tmpdir(), "bench-agent-"));
  const closedPort = await freePort();
  const agentPort = await freePort();
  const agentUrl = `http://127.0.0.1:${agentPort}`;
  const url = `s3://${s3.bucket}/bench`;
  const store = createObjectStore({
    url,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
  });
  const ctx = new RenderContext(lb.options);
  let revision = 1000;
  let configBytes = 0;
  const publish = async (extra: unknown[]): Promise<PublishResult> => {
    const config = ctx.render(
      snapshotFromDocuments([list(cluster(services, closedPort, extra), String(++revision))]),
    ).config;
    configBytes = Buffer.byteLength(config);
    return store.publish({ config, revision: String(revision), generator: "bench" });
  };
  /** A config at the next revision, not stored yet. */
  const render = (extra: unknown[]) => {
    const rev = String(++revision);
    const config = ctx.render(snapshotFromDocuments([list(cluster(services, closedPort, extra), rev)])).config;
    const sha = createHash("sha256").update(config).digest("hex");
    return {
      config,
      revision: rev,
      sha256: sha,
      key: `bench/configs/${formatConfigName({ epoch: 0, revision: BigInt(rev), seq: 0, shaPrefix: sha.slice(0, 16) })}`,
    };
  };
  /** Stores a rendered config with the metadata publish() writes, in one PUT. */
  const putRaw = async (r: ReturnType<typeof render>): Promise<PublishResult> => {
    await s3.client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: r.key,
        Body: r.config,
        ContentType: "text/plain; charset=utf-8",
        Metadata: { sha256: r.sha256, revision: r.revision, generator: "bench", epoch: "0", seq: "0" },
      }),
    );
    return {
      status: "published",
      key: r.key,
      sha256: r.sha256,
      epoch: 0,
      newest: { key: r.key, sha256: r.sha256, revision: r.revision },
      skipped: [],
    };
  };
  const notify = (p: PublishResult) =>
    fetch(`${agentUrl}/notify`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ key: p.key, sha256: p.sha256, revision: parseConfigKey(p.key)!.revision.toString() }),
    }).then((r) => {
      if (r.status !== 202) throw new Error(`notify answered ${r.status}`);
    });
  const status = async () => (await (await fetch(`${agentUrl}/status`)).json()) as { applied: { key: string } | null };
  const metric = async (name: string) =>
    Number(
      new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(
        await (await fetch(`${agentUrl}/metrics`)).text(),
      )?.[1] ?? NaN,
    );
  /** Mean of a histogram (or one label set of it), in ms. */
  const meanMs = async (name: string, labels = "") =>
    round(((await metric(`${name}_sum${labels}`)) / (await metric(`${name}_count${labels}`))) * 1000);
  const waitUntil = async (what: string, probe: () => Promise<boolean>, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await probe().catch(() => false))) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(2);
    }
  };
  const answeredBy = async (path: string, pod: string) => {
    const r = await httpGet(lb.options.httpPort, path);
    return r.status === 200 && r.body.startsWith(`${pod} `);
  };

  /** 4 keep-alive and 4 new-connection-per-request clients on /web/ until stop(). */
  const startLoad = () => {
    let running = true;
    const tally = { keepAlive: { ok: 0, failed: 0 }, fresh: { ok: 0, failed: 0 } };
    const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: 4 });
    const client = async (a: HttpAgent | false, t: { ok: number; failed: number }) => {
      while (running) {
        const ok = await httpGet(lb.options.httpPort, "/web/", a).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ok) t.ok++;
        else t.failed++;
      }
    };
    const clients = [
      ...Array.from({ length: 4 }, () => client(keepAlive, tally.keepAlive)),
      ...Array.from({ length: 4 }, () => client(false, tally.fresh)),
    ];
    return {
      tally,
      stop: async () => {
        running = false;
        await Promise.all(clients);
        keepAlive.destroy();
      },
    };
  };

  /**
   * The anchor: the original's reload, `haproxy -D -p pidfile -f cfg -sf <old pids>` (no master
   * process, as service-loadbalancer ran it), with the same configs and the same load.
   */
  const classicReloads = async (): Promise<{
    keepAlive: { ok: number; failed: number };
    fresh: { ok: number; failed: number };
    aliveAtEnd: number;
  }> => {
    const cfg = join(dir, "classic.cfg");
    const pidFile = join(dir, "classic.pid");
    const pids = new Set<number>();
    const write = (extra: unknown[]) =>
      writeFileSync(
        cfg,
        ctx
          .render(snapshotFromDocuments([list(cluster(services, closedPort, extra), String(++revision))]))
          .config.replace(/^ {4}master-worker\n/m, ""),
      );
    const start = (old: number[]) => {
      const r = spawnSync(
        "haproxy",
        ["-D", "-p", pidFile, "-f", cfg, ...(old.length > 0 ? ["-sf", ...old.map(String)] : [])],
        { encoding: "utf8" },
      );
      if (r.status !== 0) throw new Error(`classic haproxy failed: ${r.stderr}`);
      const now = readFileSync(pidFile, "utf8").split(/\s+/).filter(Boolean).map(Number);
      for (const pid of now) pids.add(pid);
      return now;
    };
    let aliveAtEnd = 0;
    write(web("web", pods.port, [A]));
    let current = start([]);
    await waitUntil("classic HAProxy serving /web/", () => answeredBy("/web/", "A"));
    const load = startLoad();
    try {
      for (let i = 0; i < reloadCount; i++) {
        write([...web("web", pods.port, [A]), ...web(`classic-${i}`, pods.port, [B])]);
        current = start(current);
        await waitUntil(`classic reload ${i} serving`, () => answeredBy(`/classic-${i}/`, "B"));
      }
    } finally {
      await load.stop();
      aliveAtEnd = [...pids].filter(processAlive).length;
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {
          // Already gone: old processes exit once their connections end.
        }
      }
    }
    return { ...load.tally, aliveAtEnd };
  };

  let agent: ChildProcess | undefined;
  try {
    await publish(web("web", pods.port, [A]));
    agent = spawnAgent({
      store: url,
      storeEndpoint: s3.endpoint,
      port: agentPort,
      configPath: join(dir, "haproxy.cfg"),
      masterSocket: join(dir, "master.sock"),
      token: TOKEN,
      logFile: join(tmpdir(), "bench-agent.log"),
      env: { SERVICELB_MIN_RELOAD_INTERVAL: "1s" },
    });
    const startedAt = performance.now();
    await waitUntil("the agent to serve", async () => (await fetch(`${agentUrl}/healthz`)).status === 200);
    const startMs = performance.now() - startedAt;

    // Structural: a new Service each time (the previous one goes), so a reload. Spaced by the
    // agent's 1 s minimum reload interval, which would otherwise be measured instead.
    const structural: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const p = await publish([...web("web", pods.port, [A]), ...web(`new-${i}`, pods.port, [B])]);
      await sleep(1000);
      const t0 = performance.now();
      await notify(p);
      await waitUntil(`/new-${i}/ served`, () => answeredBy(`/new-${i}/`, "B"));
      structural.push(performance.now() - t0);
    }

    // Endpoint-only: web's pod moves between A and B within its slots: the runtime API, no reload.
    const reloadsBefore = await metric("servicelb_agent_reloads_total");
    const endpointOnly: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const pod = i % 2 === 0 ? B : A;
      const p = await publish([...web("web", pods.port, [pod]), ...web(`new-${iterations - 1}`, pods.port, [B])]);
      const t0 = performance.now();
      await notify(p);
      await waitUntil(`/web/ served by ${pod}`, () => answeredBy("/web/", pod === A ? "A" : "B"));
      endpointOnly.push(performance.now() - t0);
      await waitUntil("the runtime change recorded", async () => (await status()).applied?.key === p.key);
    }
    // Follow-up: a second endpoint change stored and notified as soon as the first is served, i.e.
    // while the agent may still be writing and recording the first one. The second config is
    // rendered beforehand and stored with one PUT (what publish() writes, without its listing),
    // so that it arrives at once, as a quick follow-up does.
    const followUp: number[] = [];
    for (let i = 0; i < iterations; i++) {
      const first = i % 2 === 0 ? B : A;
      const second = first === A ? B : A;
      const p1 = await publish([...web("web", pods.port, [first]), ...web(`new-${iterations - 1}`, pods.port, [B])]);
      const next = render([...web("web", pods.port, [second]), ...web(`new-${iterations - 1}`, pods.port, [B])]);
      await notify(p1);
      await waitUntil(`/web/ served by ${first}`, () => answeredBy("/web/", first === A ? "A" : "B"));
      const p2 = await putRaw(next);
      const t0 = performance.now();
      await notify(p2);
      await waitUntil(`/web/ served by ${second}`, () => answeredBy("/web/", second === A ? "A" : "B"));
      followUp.push(performance.now() - t0);
      await waitUntil("the follow-up recorded", async () => (await status()).applied?.key === p2.key);
    }
    const endpointReloads = (await metric("servicelb_agent_reloads_total")) - reloadsBefore;
    const pullMeanMs = await meanMs("servicelb_agent_pull_duration_seconds");
    const reloadApplyMeanMs = await meanMs("servicelb_agent_apply_duration_seconds", '{how="reload"}');
    const runtimeApplyMeanMs = await meanMs("servicelb_agent_apply_duration_seconds", '{how="runtime"}');

    // Reloads under load.
    const underLoad = startLoad();
    const tally = underLoad.tally;
    const loadReloadsBefore = await metric("servicelb_agent_reloads_total");
    const underLoadStart = performance.now();
    for (let i = 0; i < reloadCount; i++) {
      const p = await publish([...web("web", pods.port, [A]), ...web(`load-${i}`, pods.port, [B])]);
      await notify(p);
      await waitUntil(`config ${p.key} applied`, async () => (await status()).applied?.key === p.key);
    }
    await underLoad.stop();
    const underLoadS = (performance.now() - underLoadStart) / 1000;
    const loadReloads = (await metric("servicelb_agent_reloads_total")) - loadReloadsBefore;

    // A rollout under load: Service "roll" among the others, its endpoints changed 100 times.
    const roll = rolloutSteps(rollPods.port);
    const rollStart = performance.now();
    const rollout: RolloutResult = await runRollout(
      {
        httpPort: lb.options.httpPort,
        path: "/roll",
        publish: (ips) => publish([...web("web", pods.port, [A]), ...web("roll", rollPods.port, ips)]),
        notify,
        applied: (key) => waitUntil(`${key} applied`, async () => (await status()).applied?.key === key),
        reloads: () => metric("servicelb_agent_reloads_total"),
      },
      roll.initial,
      roll.steps,
    );
    const rollS = (performance.now() - rollStart) / 1000;
    const failedReloads = await metric("servicelb_agent_reload_failures_total");
    const mem = rssKiB(agent.pid!);
    const procs = await showProc(join(dir, "master.sock"));
    const haproxyRssKiB = [procs.master, ...procs.workers, ...procs.oldWorkers].reduce(
      (sum, p) => sum + rssKiB(p.pid).rss,
      0,
    );

    const stopAt = performance.now();
    const exited = new Promise<number | null>((r) => agent!.once("exit", (code) => r(code)));
    agent.kill("SIGTERM");
    const exitCode = await exited;
    const stopS = (performance.now() - stopAt) / 1000;
    const classic = await classicReloads();

    const result = {
      machine: machine(),
      haproxy: haproxyVersion,
      services,
      endpointsPerService: ENDPOINTS,
      configBytes,
      startToHealthyMs: Math.round(startMs),
      pullMeanMs,
      structural: {
        applyMeanMs: reloadApplyMeanMs,
        n: structural.length,
        p50Ms: round(percentile(structural, 50)),
        p99Ms: round(percentile(structural, 99)),
        maxMs: round(Math.max(...structural)),
      },
      endpointOnly: {
        applyMeanMs: runtimeApplyMeanMs,
        n: endpointOnly.length,
        p50Ms: round(percentile(endpointOnly, 50)),
        p99Ms: round(percentile(endpointOnly, 99)),
        maxMs: round(Math.max(...endpointOnly)),
        reloads: endpointReloads,
      },
      endpointFollowUp: {
        n: followUp.length,
        p50Ms: round(percentile(followUp, 50)),
        p99Ms: round(percentile(followUp, 99)),
        maxMs: round(Math.max(...followUp)),
      },
      underLoad: {
        reloads: loadReloads,
        failedReloads,
        seconds: Math.round(underLoadS),
        keepAlive: tally.keepAlive,
        newConnection: tally.fresh,
      },
      rollout: {
        changes: rollout.changes,
        reloads: rollout.reloads,
        seconds: Math.round(rollS),
        keepAlive: {
          ok: rollout.keepAlive.ok,
          at503WhileZero: rollout.keepAlive.atZero,
          failed: rollout.keepAlive.failed.length,
        },
        newConnection: {
          ok: rollout.fresh.ok,
          at503WhileZero: rollout.fresh.atZero,
          failed: rollout.fresh.failed.length,
        },
      },
      agentRssMiB: mib(mem.rss * 1024),
      agentPeakRssMiB: mib(mem.peak * 1024),
      haproxyRssMiB: mib(haproxyRssKiB * 1024),
      haproxyProcesses: 1 + procs.workers.length + procs.oldWorkers.length,
      sigterm: { exitCode, seconds: round(stopS) },
      classicSfAnchor: {
        reloads: reloadCount,
        keepAlive: classic.keepAlive,
        newConnection: classic.fresh,
        processesAliveAtEnd: classic.aliveAtEnd,
      },
    };
    if (process.argv.includes("--json")) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      return;
    }
    const failed = tally.keepAlive.failed + tally.fresh.failed;
    console.log(`bench/agent — ${result.machine}, HAProxy ${haproxyVersion}`);
    console.log(
      `${services} Services × ${ENDPOINTS} endpoints (${configBytes} config bytes); ${iterations} changes of each kind; min reload interval 1 s\n`,
    );
    console.log(
      table(
        ["measurement", "p50", "p99", "max", "notes"],
        [
          [
            "notify → new backend served (structural, reload)",
            `${result.structural.p50Ms} ms`,
            `${result.structural.p99Ms} ms`,
            `${result.structural.maxMs} ms`,
            `${iterations} reloads; mean pull ${pullMeanMs} ms, check + reload ${reloadApplyMeanMs} ms`,
          ],
          [
            "notify → new endpoint served (endpoint-only)",
            `${result.endpointOnly.p50Ms} ms`,
            `${result.endpointOnly.p99Ms} ms`,
            `${result.endpointOnly.maxMs} ms`,
            `${endpointReloads} reloads (both rows); runtime API + write ${runtimeApplyMeanMs} ms`,
          ],
          [
            "  the same, right after another one was served",
            `${result.endpointFollowUp.p50Ms} ms`,
            `${result.endpointFollowUp.p99Ms} ms`,
            `${result.endpointFollowUp.maxMs} ms`,
            "stored and pinged as soon as the previous one is served",
          ],
        ],
      ),
    );
    console.log();
    console.log(
      table(
        ["measurement", "value"],
        [
          [
            `failed requests across ${loadReloads} reloads under load`,
            `${failed} of ${failed + tally.keepAlive.ok + tally.fresh.ok}`,
          ],
          ["  keep-alive clients (4)", `${tally.keepAlive.failed} failed, ${tally.keepAlive.ok} ok`],
          ["  new connection per request (4)", `${tally.fresh.failed} failed, ${tally.fresh.ok} ok`],
          [
            `anchor: failed requests across ${reloadCount} classic -sf reloads, same load`,
            `${classic.keepAlive.failed + classic.fresh.failed} of ${classic.keepAlive.failed + classic.fresh.failed + classic.keepAlive.ok + classic.fresh.ok}`,
          ],
          ["  keep-alive clients (4)", `${classic.keepAlive.failed} failed, ${classic.keepAlive.ok} ok`],
          ["  new connection per request (4)", `${classic.fresh.failed} failed, ${classic.fresh.ok} ok`],
          ["  HAProxy processes still running after the last reload", classic.aliveAtEnd],
          [
            `failed requests across a rollout of ${rollout.changes} endpoint changes under load`,
            `${rollout.keepAlive.failed.length + rollout.fresh.failed.length} of ${[rollout.keepAlive, rollout.fresh].reduce((n, t) => n + t.ok + t.atZero + t.failed.length, 0)}, ${rollout.reloads} reloads`,
          ],
          [
            "  keep-alive clients (4)",
            `${rollout.keepAlive.failed.length} failed, ${rollout.keepAlive.ok} ok, ${rollout.keepAlive.atZero} × 503 while at zero endpoints`,
          ],
          [
            "  new connection per request (4)",
            `${rollout.fresh.failed.length} failed, ${rollout.fresh.ok} ok, ${rollout.fresh.atZero} × 503 while at zero endpoints`,
          ],
          ["failed reloads", failedReloads],
          ["agent start → /healthz 200", `${result.startToHealthyMs} ms`],
          ["agent RSS after the run (peak)", `${result.agentRssMiB} MiB (${result.agentPeakRssMiB} MiB)`],
          [`HAProxy RSS, ${result.haproxyProcesses} processes (sum)`, `${result.haproxyRssMiB} MiB`],
          ["SIGTERM → exit", `code ${exitCode} in ${result.sigterm.seconds} s`],
        ],
      ),
    );
    console.log(
      `\np50/p99 are nearest-rank over ${iterations} samples each (p99 of fewer than 100 samples is the largest).`,
    );
    console.log(`The agent's and HAProxy's logs of this run: ${join(tmpdir(), "bench-agent.log")}`);
  } finally {
    if (agent && agent.exitCode === null && agent.signalCode === null) {
      // SIGTERM, not SIGKILL: the agent must take its HAProxy down with it.
      const gone = new Promise((r) => agent!.once("exit", r));
      agent.kill("SIGTERM");
      await Promise.race([gone, sleep(20_000)]);
    }
    store.close();
    await pods.close();
    await rollPods.close();
    await s3.stop();
    lb.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
