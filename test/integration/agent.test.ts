import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { processAlive } from "../../shared/adapters/haproxy/proc-info.js";
import { createObjectStore } from "../../shared/adapters/store.js";
import { stateFilePath } from "../../shared/agent/options.js";
import { ConfigFiles } from "../../shared/agent/config-files.js";
import { createLogger } from "../../shared/adapters/log.js";
import { PATTERN_SECTION } from "../../shared/core/haproxy-config/pattern-files.js";
import { runStatus, type FleetStatus } from "../../shared/app/status-command.js";
import { A, agentWorld, B, C, count, echoPods, TOKEN, web } from "../support/agent.js";
import { waitFor } from "../support/net.js";
import { deadEndpoint, replaceBody, S3RVER_CREDENTIALS } from "../support/s3.js";

// The node agent against a real HAProxy and a real S3 protocol server (s3rver). Pods are echo
// servers on 127.0.0.2-4 (one port), so a Service's endpoints differ by address as in a cluster.

const world = agentWorld();
const { node, start, served, answering, appliedKey, cleanups } = world;

describe("applying configs", () => {
  it("serves the newest config at start, before any ping, and applies a structural change with exactly one reload", async () => {
    const n = await node();
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    expect(agent.status().applied).toMatchObject({ key: first.key, revision: "100", how: "start" });
    expect(await n.get("/web/x")).toEqual({ status: 200, body: "A /x" });

    const before = await n.reloads();
    const second = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [B])], 110);
    expect(await n.notify(agent, second)).toMatchObject({ status: 202 });
    await appliedKey(agent, second.key);
    await served(n, "/api/y", "B");
    expect(agent.status().applied).toMatchObject({ revision: "110", how: "reload", sha256: second.sha256 });
    expect(await n.reloads()).toBe(before + 1);
    expect(await count(agent.metrics.reloads)).toBe(1);
    expect(await count(agent.metrics.reloadFailures)).toBe(0);
    // The file is the new config and the state beside it names it, for a restart.
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(second.key)).config);
    // status() says applied as the state file is being written: wait for the file itself.
    const saved = await waitFor("the state file names it", async () => {
      const state = JSON.parse(readFileSync(stateFilePath(n.options()), "utf8")) as { applied?: { key?: string } };
      return state.applied?.key === second.key ? state : undefined;
    });
    expect(saved).toMatchObject({ applied: { key: second.key }, lastError: null });
    const health = await fetch(`${agent.url}/healthz`);
    expect(health.status).toBe(200);
  });

  it("applies endpoint-only changes (move, scale up, scale down) through the runtime API with 0 reloads", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const before = await n.reloads();

    const moved = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, moved);
    await appliedKey(agent, moved.key);
    expect(agent.status().applied?.how).toBe("runtime");
    expect(await answering(n, "/web/")).toEqual(["B"]);

    const up = await n.publish(web("web", world.pods.port, [B, C]), 120);
    await n.notify(agent, up);
    await appliedKey(agent, up.key);
    expect(await answering(n, "/web/")).toEqual(["B", "C"]);

    const down = await n.publish(web("web", world.pods.port, [C]), 130);
    await n.notify(agent, down);
    await appliedKey(agent, down.key);
    expect(await answering(n, "/web/")).toEqual(["C"]);

    expect(await n.reloads()).toBe(before);
    expect(await count(agent.metrics.reloads)).toBe(0);
    expect(await count(agent.metrics.runtimeUpdates)).toBe(3);
    // Written too, so that a later reload keeps the runtime changes...
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(down.key)).config);
    const structural = await n.publish([...web("web", world.pods.port, [C]), ...web("api", world.pods.port, [A])], 140);
    await n.notify(agent, structural);
    await appliedKey(agent, structural.key);
    await served(n, "/api/", "A");
    expect(await n.reloads()).toBe(before + 1);
    // ...and the server-state file carried over by the reload does not bring the old slots back.
    expect(await answering(n, "/web/")).toEqual(["C"]);
    expect(readFileSync(n.lb.options.serverStateFile, "utf8")).toBe("1\n");
  });

  it("never lets the saved server state override a slot's new port on reload (HAProxy 2.6 would)", async () => {
    const other = await echoPods({ [A]: "A2" });
    cleanups.push(() => other.close());
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    await served(n, "/web/", "A");
    // Same slot, same address, another port, plus a new Service: a reload with the state file in play.
    const next = await n.publish([...web("web", other.port, [A]), ...web("api", world.pods.port, [B])], 110);
    await n.notify(agent, next);
    await appliedKey(agent, next.key);
    expect(agent.status().applied?.how).toBe("reload");
    expect(await answering(n, "/web/")).toEqual(["A2"]);
  });

  it("rejects a config that fails haproxy -c, keeps serving the old one and reports the error", async () => {
    const n = await node();
    const good = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const before = await n.reloads();
    const goodText = readFileSync(n.configPath, "utf8");
    // Correct sha256 and key, broken body: only haproxy -c can tell. Before the file section, which is comments.
    const broken = await n.store.publish({
      config: goodText.replace(
        `${PATTERN_SECTION}\n`,
        `backend broken\n    nosuchdirective on\n\n${PATTERN_SECTION}\n`,
      ),
      revision: "110",
      generator: "servicelb/test",
    });
    expect(await n.notify(agent, broken)).toMatchObject({ status: 202 });
    const err = await waitFor("the check error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({ stage: "check", key: broken.key });
    expect(err.message).toMatch(/nosuchdirective/);
    expect(agent.status()).toMatchObject({ applied: { key: good.key }, backoff: { key: broken.key, attempts: 1 } });
    expect(readFileSync(n.configPath, "utf8")).toBe(goodText);
    expect(await n.get("/web/still")).toEqual({ status: 200, body: "A /still" });
    expect(await n.reloads()).toBe(before);
    expect((await fetch(`${agent.url}/healthz`)).status).toBe(200);
    const reported = await waitFor("the error in status/<node>.json", async () => {
      const all = (await n.store.listStatuses()) as Array<{ lastError: { key: string } | null }>;
      return all.find((s) => s.lastError?.key === broken.key);
    });
    expect(reported).toMatchObject({ applied: { key: good.key }, lastError: { stage: "check" } });

    // While it backs off, the broken config is not fetched again; a newer good one is applied at once.
    await n.notify(agent, broken);
    const fixed = await n.publish(web("web", world.pods.port, [B]), 120);
    await n.notify(agent, fixed);
    await appliedKey(agent, fixed.key);
    expect(agent.status()).toMatchObject({ lastError: null, backoff: null });
    expect(await count(agent.metrics.applyFailures, { stage: "check" })).toBe(1);
    await served(n, "/web/", "B");
  });

  it("refuses a config that protects the stats page when SERVICELB_STATS_PASSWORD is not set on the node", async () => {
    expect(process.env.SERVICELB_STATS_PASSWORD).toBeUndefined();
    const n = await node({ statsUser: "admin" });
    const cfg = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const err = await waitFor("the check error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({
      stage: "check",
      key: cfg.key,
      message: expect.stringContaining("SERVICELB_STATS_PASSWORD is not set"),
    });
    expect(agent.status().applied).toBeNull();
  });

  it("undoes a runtime change HAProxy refuses and rejects that config", async () => {
    const n = await node();
    const good = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const before = await n.reloads();
    const goodText = readFileSync(n.configPath, "utf8");
    // Only a server address differs, so it takes the runtime path; 300.1.2.3 fits the line's grammar but is no address.
    const bad = await n.store.publish({
      config: goodText.replace(`${A}:${world.pods.port}`, `300.1.2.3:${world.pods.port}`),
      revision: "110",
      generator: "servicelb/test",
    });
    await n.notify(agent, bad);
    const err = await waitFor("the error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({ stage: "check", key: bad.key });
    expect(agent.status().applied?.key).toBe(good.key);
    expect(await answering(n, "/web/")).toEqual(["A"]);
    expect(readFileSync(n.configPath, "utf8")).toBe(goodText);
    expect(await n.reloads()).toBe(before);
  });

  it("refuses a config whose body does not match its sha256", async () => {
    const n = await node();
    const good = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const next = await n.publish(web("web", world.pods.port, [B]), 110);
    const text = (await n.store.get(next.key)).config;
    // Tampered behind the store's back: same key and metadata, another body.
    await replaceBody(world.s3, next.key, text.replace(B, C));
    await n.notify(agent, next);
    const err = await waitFor("the verify error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({ stage: "verify", key: next.key });
    expect(err.message).toMatch(/sha256/);
    expect(agent.status().applied?.key).toBe(good.key);
    expect(await answering(n, "/web/")).toEqual(["A"]);
  });

  it("applies configs published by tree1 digests after sha256 ones with 0 reloads, refuses a tampered one, and says it verifies both", async () => {
    const n = await node();
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const before = await n.reloads();
    // The publishers switched (every agent reports tree1): the next change comes by tree1.
    const moved = await n.publish(web("web", world.pods.port, [B]), 110, "tree1");
    expect(first.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(moved.sha256).toMatch(/^tree1:[0-9a-f]{64}$/);
    expect(await n.notify(agent, moved)).toMatchObject({ status: 202 });
    await appliedKey(agent, moved.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    expect(agent.status().applied).toMatchObject({ how: "runtime", sha256: moved.sha256 });
    expect(await n.reloads()).toBe(before);

    const next = await n.publish(web("web", world.pods.port, [C]), 120, "tree1");
    const text = (await n.store.get(next.key)).config;
    await replaceBody(world.s3, next.key, text.replace(C, A));
    await n.notify(agent, next);
    const err = await waitFor("the verify error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({ stage: "verify", key: next.key });
    expect(err.message).toMatch(/tree1 digest/);
    expect(agent.status().applied?.key).toBe(moved.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    const [report] = await waitFor("a report of the verify error", async () => {
      const reports = (await n.store.listStatuses()) as Array<{ digests?: string[]; lastError: unknown }>;
      return reports[0]?.lastError ? reports : undefined;
    });
    expect(report?.digests).toEqual(["sha256", "tree1"]);
  });

  it("rate-limits reloads and lets the newest config win over one waiting for its slot", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    // Long enough that v3's haproxy -c ends inside it even on a loaded machine (CI's may be busy):
    // v3 must still be waiting for its slot when v4 arrives.
    const agent = await start(n, { minReloadInterval: "4000ms" });
    const v2 = await n.publish([...web("web", world.pods.port, [A]), ...web("b2", world.pods.port, [B])], 110);
    await n.notify(agent, v2);
    await appliedKey(agent, v2.key);
    const v2At = Date.parse(agent.status().applied!.appliedAt);
    const v3 = await n.publish([...web("web", world.pods.port, [A]), ...web("b3", world.pods.port, [B])], 120);
    await n.notify(agent, v3);
    // v3 is pulled and checked, then waits for its reload slot; v4 arrives while it waits.
    await waitFor("v3 pulled", async () =>
      (await count(agent.metrics.pulls, { result: "new" })) >= 3 ? true : undefined,
    );
    const v4 = await n.publish([...web("web", world.pods.port, [A]), ...web("b4", world.pods.port, [B])], 130);
    await n.notify(agent, v4);
    await appliedKey(agent, v4.key);
    // Reloads start at least 4,000 ms apart; appliedAt is when each ended, and on a loaded machine
    // two reloads' own durations may differ by a second.
    expect(Date.parse(agent.status().applied!.appliedAt) - v2At).toBeGreaterThanOrEqual(3000);
    expect(await count(agent.metrics.reloads)).toBe(2);
    await served(n, "/b4/", "B");
    expect((await n.get("/b3/")).status).toBe(404);
  });
});

describe("converging and recovering", () => {
  it("converges by polling when every ping is lost", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { pollInterval: "300ms" });
    const next = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [C])], 110);
    const t0 = Date.now();
    await appliedKey(agent, next.key);
    // Within a few poll periods (300 ms each), with room for a busy machine; without the poll it never would.
    expect(Date.now() - t0).toBeLessThan(8000);
    await served(n, "/api/", "C");
  });

  it("serves the last good config on disk when the store is unreachable at start", async () => {
    const n = await node();
    const good = await n.publish(web("web", world.pods.port, [A]), 100);
    const first = await n.start();
    await first.stop();
    const dead = createObjectStore({
      url: `s3://${world.s3.bucket}/${n.prefix}`,
      endpoint: deadEndpoint(),
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
      timeoutMs: 500,
    });
    cleanups.push(() => dead.close());
    const agent = await start(n, {}, { store: dead });
    expect(await n.get("/web/")).toEqual({ status: 200, body: "A /" });
    expect(agent.status()).toMatchObject({ applied: { key: good.key, how: "start" }, lastError: { stage: "pull" } });
    expect((await fetch(`${agent.url}/healthz`)).status).toBe(200);
  });

  it("answers /healthz 503 with the reason while it has no config to serve, and keeps trying", async () => {
    const n = await node();
    const dead = createObjectStore({
      url: `s3://${world.s3.bucket}/${n.prefix}`,
      endpoint: deadEndpoint(),
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
      timeoutMs: 500,
    });
    cleanups.push(() => dead.close());
    const agent = await start(n, {}, { store: dead });
    const health = await fetch(`${agent.url}/healthz`);
    expect(health.status).toBe(503);
    expect(await health.json()).toEqual({
      ok: false,
      reason: expect.stringMatching(/^no config applied yet \(last error: cannot read the store: /),
    });
    expect(agent.status()).toMatchObject({ applied: null, haproxy: { running: false }, lastError: { stage: "pull" } });
  });

  it("reports itself down in the store when stopped", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await n.start();
    await agent.stop();
    const [last] = (await n.store.listStatuses()) as Array<{ haproxy: { running: boolean } }>;
    expect(last).toMatchObject({ haproxy: { running: false } });
  });

  it("recovers when killed between writing the config and reloading", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const v2 = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [B])], 110);
    const v1Text = (await n.store.get(v1.key)).config;
    const v2Text = (await n.store.get(v2.key)).config;
    // The killed agent's world: its HAProxy still runs v1, its state names v1, and v2 was
    // already renamed into place when it died.
    const options = n.options();
    await import("node:fs/promises").then((fs) =>
      Promise.all([fs.mkdir(options.stateDir, { recursive: true }), fs.mkdir(join(n.dir, "etc"), { recursive: true })]),
    );
    // With the route maps beside it, as the agent writes them.
    await new ConfigFiles(n.configPath, createLogger("test", "silent")).writeConfig(v1Text);
    const orphan = spawn("haproxy", ["-W", "-S", n.masterSocket, "-f", n.configPath], { stdio: "ignore" });
    cleanups.push(() => void (processAlive(orphan.pid!) && orphan.kill("SIGKILL")));
    await waitFor("the orphan HAProxy", async () =>
      (await showProc(n.masterSocket, { timeoutMs: 500 })).workers.length > 0 ? true : undefined,
    );
    writeFileSync(
      stateFilePath(options),
      JSON.stringify({
        applied: {
          key: v1.key,
          sha256: v1.sha256,
          revision: "100",
          appliedAt: new Date().toISOString(),
          how: "reload",
        },
        lastError: null,
      }),
    );
    writeFileSync(n.configPath, v2Text);
    expect((await n.get("/api/")).status).toBe(404);

    const agent = await start(n);
    expect(agent.status().applied).toMatchObject({ key: v2.key, how: "start" });
    await served(n, "/api/", "B");
    await waitFor("the orphan to leave", async () => (processAlive(orphan.pid!) ? undefined : true));
    expect(await answering(n, "/api/")).toEqual(["B"]);
    expect((await fetch(`${agent.url}/healthz`)).status).toBe(200);
    expect((await showProc(n.masterSocket)).master.pid).not.toBe(orphan.pid);
  });

  it("restarts a killed HAProxy: /healthz goes 503, then 200, and traffic flows", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const seen: number[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        seen.push((await fetch(`${agent.url}/healthz`)).status);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const master = (await showProc(n.masterSocket)).master.pid;
    process.kill(master, "SIGKILL");
    await waitFor("/healthz 503", async () => (seen.includes(503) ? true : undefined));
    await waitFor("/healthz 200 again", async () => (seen.at(-1) === 200 ? true : undefined));
    polling = false;
    await poller;
    expect(seen.slice(seen.indexOf(503))).toContain(200);
    expect((await showProc(n.masterSocket)).master.pid).not.toBe(master);
    await served(n, "/web/", "A");
    expect(await count(agent.metrics.haproxyRestarts, { cause: "master-exited" })).toBe(1);
    // A config that had served is not held responsible: restarted at once, and said so.
    expect(agent.status().haproxy).toMatchObject({
      running: true,
      restarts: 1,
      lastRestart: { cause: "master-exited", delayMs: 0, signal: "SIGKILL" },
      pendingRestart: null,
    });
    // The recovery is observed once the restarted master is seen serving, which may follow /healthz's 200.
    const metrics = await waitFor("the recovery observed", async () => {
      const text = await (await fetch(`${agent.url}/metrics`)).text();
      return /^servicelb_agent_haproxy_recovery_seconds_count\{cause="master-exited"\} 1$/m.test(text)
        ? text
        : undefined;
    });
    expect(metrics).toMatch(/^servicelb_agent_haproxy_restart_delay_seconds 0$/m);
  });
});

describe("HTTP API", () => {
  it("answers /notify 401 without or with a wrong token, 400 on a malformed body, 202 when accepted", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const post = (body: string, auth?: string) =>
      fetch(`${agent.url}/notify`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(auth ? { authorization: auth } : {}) },
        body,
      });
    const ok = JSON.stringify({ key: v1.key, sha256: v1.sha256, revision: "100" });

    const none = await post(ok);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect((await post(ok, "Bearer wrong-token")).status).toBe(401);
    expect((await post(ok, `Bearer ${TOKEN}x`)).status).toBe(401);
    expect((await post(ok, `Basic ${TOKEN}`)).status).toBe(401);
    expect((await post("{not json", `Bearer ${TOKEN}`)).status).toBe(400);
    expect((await post(`{"pad":"${"x".repeat(64 * 1024)}"}`, `Bearer ${TOKEN}`)).status).toBe(413);
    const missing = await post(JSON.stringify({ key: v1.key }), `Bearer ${TOKEN}`);
    expect(missing.status).toBe(400);
    expect(await missing.text()).toMatch(/sha256/);
    expect(
      (await post(JSON.stringify({ key: "../../etc/passwd", sha256: v1.sha256, revision: "1" }), `Bearer ${TOKEN}`))
        .status,
    ).toBe(400);
    const accepted = await post(ok, `Bearer ${TOKEN}`);
    expect(accepted.status).toBe(202);
    expect(await accepted.json()).toEqual({ accepted: true, action: "current" });
    expect((await fetch(`${agent.url}/notify`)).status).toBe(405);
    expect((await fetch(`${agent.url}/nope`)).status).toBe(404);
    expect(await count(agent.metrics.notifications, { result: "unauthorized" })).toBe(4);

    // The token file is read at every request: a rotated Secret works without a restart.
    writeFileSync(join(n.dir, "token"), "rotated\n");
    expect((await post(ok, `Bearer ${TOKEN}`)).status).toBe(401);
    expect((await post(ok, "Bearer rotated")).status).toBe(202);
  });

  it("forwards HAProxy's own log lines (--syslog) to the agent's stdout", async () => {
    const n = await node({ syslog: true });
    await n.publish(web("web", world.pods.port, [A]), 100);
    const lines: string[] = [];
    await start(n, {}, { haproxyLog: (line: string) => lines.push(line) });
    await n.get("/web/logged-request");
    const line = await waitFor("the access log line", async () => lines.find((l) => l.includes("/web/logged-request")));
    expect(line).toMatch(/http default_web_80\/s\d+ .* 200 .*"GET \/web\/logged-request HTTP\/1\.1"/);
  });

  it("folds a burst of 20 notifies into at most a couple of pulls", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const pullsBefore = await count(agent.metrics.pulls);
    const next = await n.publish(web("web", world.pods.port, [B]), 110);
    const answers = await Promise.all(Array.from({ length: 20 }, () => n.notify(agent, next)));
    expect(answers.every((a) => a.status === 202)).toBe(true);
    await appliedKey(agent, next.key);
    await new Promise((r) => setTimeout(r, 300));
    expect((await count(agent.metrics.pulls)) - pullsBefore).toBeLessThanOrEqual(2);
    expect(await count(agent.metrics.pulls, { result: "new" })).toBe(2); // the start and this one
  });

  it("serves /status and Prometheus /metrics", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    const status = (await (await fetch(`${agent.url}/status`)).json()) as Record<string, unknown>;
    expect(status).toMatchObject({
      node: expect.stringMatching(/^node-\d+$/),
      applied: { key: v1.key, sha256: v1.sha256, revision: "100" },
      lastError: null,
      haproxy: { running: true },
    });
    const metrics = await (await fetch(`${agent.url}/metrics`)).text();
    expect(metrics).toMatch(/^servicelb_agent_applied_revision 100$/m);
    for (const name of [
      "pulls_total",
      "reloads_total",
      "reload_failures_total",
      "runtime_updates_total",
      "pull_duration_seconds_bucket",
      "apply_duration_seconds_bucket",
    ]) {
      expect(metrics).toContain(`servicelb_agent_${name}`);
    }
  });
});

describe("servicelb status", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it("shows for every node which config it runs and whether it is behind", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    await start(n);
    await waitFor("the status report", async () => ((await n.store.listStatuses()).length === 1 ? true : undefined));
    vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
    const flags = {
      store: `s3://${world.s3.bucket}/${n.prefix}`,
      storeEndpoint: world.s3.endpoint,
      storePathStyle: true,
    };
    const run = async (extra: Record<string, unknown>, exitCode: number) => {
      let out = "";
      const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
        out += String(chunk);
        return true;
      });
      vi.spyOn(process.stderr, "write").mockImplementation(() => true);
      expect(await runStatus({ ...flags, ...extra })).toBe(exitCode);
      spy.mockRestore();
      return out;
    };
    const summary = await run({}, 0);
    expect(summary).toContain(`newest: ${v1.key} (revision 100)`);
    expect(summary).toContain("nodes: 1: 1 current, 0 behind, 0 down; 0 pinned\n");
    expect(summary).not.toMatch(/^node-\d+\s/m);
    const text = await run({ nodes: true }, 0);
    expect(text).toMatch(
      /^node-\d+\s+100\s+current\s+running\s+\d+s ago\s+000000-0+100-0000000000-[0-9a-f]{16}\.cfg\s+sha256,tree1\s+-$/m,
    );

    // Published without a ping and with a long poll interval: the node is behind until it pulls,
    // and status says so in its exit code.
    const v2 = await n.publish(web("web", world.pods.port, [B]), 110);
    const fleet = JSON.parse(await run({ format: "json" }, 3)) as FleetStatus;
    expect(fleet.newest).toEqual({ key: v2.key, revision: "110" });
    expect(fleet.nodes).toEqual([
      expect.objectContaining({
        key: v1.key,
        revision: "100",
        behind: true,
        stale: false,
        haproxyRunning: true,
        lastError: null,
      }),
    ]);
  });
});
