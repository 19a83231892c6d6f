import { spawn } from "node:child_process";
import { join } from "node:path";
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { processAlive } from "../../shared/adapters/haproxy/proc-info.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { A, agentWorld, B, count, TOKEN, web } from "../support/agent.js";
import { dripProxy, type DripProxy } from "../support/drip.js";
import { list } from "../support/fixtures.js";
import { freePort, waitFor } from "../support/net.js";
import { S3RVER_CREDENTIALS } from "../support/s3.js";

// The node agent against a store that answers slowly or serves an object too large: a real
// HAProxy, s3rver, and between the agent and s3rver a proxy that drips, stalls or passes answers.

const world = agentWorld();
const { node, start, served, appliedKey, cleanups } = world;
const bin = join(import.meta.dirname, "..", "..", "bin", "servicelb.js");

async function proxy(): Promise<DripProxy> {
  const p = await dripProxy(world.s3.endpoint);
  cleanups.push(() => p.stop());
  return p;
}

/** A GET of one config object (not a listing, which is a GET of the bucket). */
const configGet = (req: IncomingMessage) =>
  req.method === "GET" && /\/configs\/[0-9a-f-]+\.cfg$/.test(new URL(req.url ?? "/", "http://x").pathname);

const ownStore = { store: undefined, storeCredentials: S3RVER_CREDENTIALS };

async function healthz(
  url: string,
): Promise<{ status: number; body: { ok: boolean; warning?: string; reason?: string } }> {
  const res = await fetch(`${url}/healthz`);
  return { status: res.status, body: (await res.json()) as { ok: boolean; warning?: string } };
}

describe("a store that answers slowly", () => {
  it("abandons a pull whose config drips, says the pulls are stale while HAProxy serves on, and applies the config once the store recovers", async () => {
    const n = await node();
    const drip = await proxy();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(
      n,
      { storeEndpoint: drip.endpoint, storeTimeout: "1s", pollInterval: "500ms", stalePullPeriods: "4" },
      ownStore,
    );
    expect(agent.status().applied?.key).toBe(v1.key);
    expect(agent.status().pull).toMatchObject({ stale: false, consecutiveFailures: 0, staleAfterSeconds: 2 });

    // The listing still answers, but the config it names comes one byte at a time: no idle timeout fires.
    drip.mode = (req) => (configGet(req) ? "drip" : "pass");
    const v2 = await n.publish(web("web", world.pods.port, [B]), 110);
    await waitFor("a failed pull, and the pulls stale", async () =>
      agent.status().pull?.stale && agent.status().lastError ? true : undefined,
    );
    const status = agent.status();
    expect(status.lastError).toMatchObject({
      stage: "pull",
      key: v2.key,
      message: expect.stringContaining("no complete answer within 1000 ms"),
    });
    expect(status.pull?.consecutiveFailures).toBeGreaterThanOrEqual(1);
    expect(status.pull?.lastFailure?.message).toContain("no complete answer within 1000 ms");
    expect(status.applied?.key).toBe(v1.key);
    // The node still load-balances: liveness stays green, and says what is wrong.
    expect(await healthz(agent.url)).toEqual({
      status: 200,
      body: {
        ok: true,
        warning: expect.stringMatching(
          /^no pull from the store has completed since .* \(over 2 s\); HAProxy serves the last applied config$/,
        ),
      },
    });
    await served(n, "/web/", "A");
    const metrics = await (await fetch(`${agent.url}/metrics`)).text();
    expect(metrics).toMatch(/^servicelb_agent_pull_stale 1$/m);
    expect(await count(agent.metrics.storeFailures, { operation: "get", reason: "deadline" })).toBeGreaterThanOrEqual(
      1,
    );
    // The poll loop goes on: the next pull is tried, and abandoned in turn.
    await waitFor("a second failed pull", async () =>
      (agent.status().pull?.consecutiveFailures ?? 0) >= 2 ? true : undefined,
    );

    // The store recovers: the next poll applies v2, and the pulls are no longer stale.
    drip.mode = () => "pass";
    await appliedKey(agent, v2.key);
    await served(n, "/web/", "B");
    expect(agent.status().pull).toMatchObject({ stale: false, consecutiveFailures: 0 });
    expect(await healthz(agent.url)).toEqual({ status: 200, body: { ok: true } });
    expect(await (await fetch(`${agent.url}/metrics`)).text()).toMatch(/^servicelb_agent_pull_stale 0$/m);
  });

  it("stops within seconds on SIGTERM while a store request hangs, far short of its deadline", async () => {
    const n = await node();
    const drip = await proxy();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const o = n.options();
    const child = spawn(process.execPath, [bin, "agent"], {
      stdio: ["ignore", "ignore", "pipe"],
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/root",
        LOG_LEVEL: "warn",
        AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
        SERVICELB_STORE: o.store,
        SERVICELB_STORE_ENDPOINT: drip.endpoint,
        SERVICELB_STORE_PATH_STYLE: "true",
        SERVICELB_NODE_NAME: "sigterm",
        SERVICELB_LISTEN: `127.0.0.1:${await freePort()}`,
        SERVICELB_CONFIG_PATH: o.configPath,
        SERVICELB_STATE_DIR: o.stateDir,
        SERVICELB_MASTER_SOCKET: o.masterSocket,
        SERVICELB_POLL_INTERVAL: "200ms",
        // Only stopping can end a hung request within this test.
        SERVICELB_STORE_TIMEOUT: "10m",
        SERVICELB_STOP_GRACE: "2s",
        SERVICELB_NOTIFY_TOKEN: TOKEN,
      },
    });
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on("exit", (code, signal) => resolve({ code, signal })),
    );
    let master: number | undefined;
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      if (master !== undefined && processAlive(master)) process.kill(master, "SIGKILL");
    });
    await served(n, "/web/", "A");
    master = await waitFor("the master", async () => (await showProc(n.masterSocket, { timeoutMs: 500 })).master.pid);

    drip.mode = () => "stall";
    const before = drip.seen.length;
    // A poll's listing hangs (and so will the final status report).
    await waitFor("a pull to hang", async () =>
      drip.seen.slice(before).some((r) => r.method === "GET") && drip.held > 0 ? true : undefined,
    );
    child.kill("SIGTERM");
    const outcome = await Promise.race([
      exited,
      new Promise((r) => setTimeout(() => r("still running after 30 s"), 30_000)),
    ]);
    expect(outcome, stderr).toEqual({ code: 0, signal: null });
    expect(processAlive(master)).toBe(false);
    expect(stderr).toContain("cannot write the final status");
  });
});

describe("an object over the size cap", () => {
  it("is refused from its Content-Length and reported, the running config serves on, and a newer config under the cap is applied", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { maxConfigSize: "64Ki" }, ownStore);
    expect(agent.status().applied?.key).toBe(v1.key);

    // A valid config with a valid sha256, only too large: 256 KiB of comment lines.
    const rendered = n.renderContext.render(
      snapshotFromDocuments([list(web("web", world.pods.port, [B]), "110")]),
    ).config;
    const big = await n.store.publish({
      config: `${rendered}${"# padding\n".repeat(26_215)}`,
      revision: "110",
      generator: "servicelb/test",
    });
    expect(await n.notify(agent, big)).toMatchObject({ status: 202 });
    await waitFor("the refusal", async () => (agent.status().lastError?.key === big.key ? true : undefined));
    expect(agent.status()).toMatchObject({
      applied: { key: v1.key },
      lastError: {
        stage: "verify",
        key: big.key,
        message: expect.stringMatching(
          /the object is \d+ bytes, over the cap of 65536 bytes; refused without reading it/,
        ),
      },
      // Skipped (looked at again after a backoff), not backed off: that would hold every older key too.
      skipped: [{ key: big.key, reason: expect.stringMatching(/over the cap of 65536 bytes/) }],
      backoff: null,
    });
    expect(await count(agent.metrics.storeFailures, { operation: "get", reason: "too-large" })).toBeGreaterThanOrEqual(
      1,
    );
    expect(await count(agent.metrics.applyFailures, { stage: "verify" })).toBe(1);
    await served(n, "/web/", "A");

    const v3 = await n.publish(web("web", world.pods.port, [B]), 120);
    await n.notify(agent, v3);
    await appliedKey(agent, v3.key);
    await served(n, "/web/", "B");
  });
});

describe("pin.json and the pulls' health", () => {
  const pinGet = (req: IncomingMessage) =>
    req.method === "GET" && new URL(req.url ?? "/", "http://x").pathname.endsWith("/pin.json");

  it("a pin.json the store fails to serve is a failed pull in /status, as it is in the metrics", async () => {
    const n = await node();
    const drip = await proxy();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    // Never stale within the test: only the failures are looked at.
    const agent = await start(
      n,
      { storeEndpoint: drip.endpoint, pollInterval: "300ms", stalePullPeriods: "1000" },
      ownStore,
    );
    expect(agent.status().applied?.key).toBe(v1.key);

    drip.refuseStatus = 500;
    drip.mode = (req) => (pinGet(req) ? "refuse" : "pass");
    await waitFor("three failed pin.json reads", async () =>
      (await count(agent.metrics.storeFailures, { operation: "get" })) >= 3 ? true : undefined,
    );
    const failedReads = await count(agent.metrics.storeFailures, { operation: "get" });
    const { pull, lastError } = agent.status();
    expect(pull?.consecutiveFailures).toBeGreaterThanOrEqual(Math.min(3, failedReads));
    expect(pull?.lastFailure?.message).toContain("pin.json");
    expect(lastError).toMatchObject({ stage: "pull", message: expect.stringContaining("pin.json") });
    await served(n, "/web/", "A");

    drip.mode = () => "pass";
    await waitFor("a complete pull", async () => (agent.status().pull?.consecutiveFailures === 0 ? true : undefined));
    expect(agent.status().lastError).toBeNull();
  });

  it("while the pinned config runs, a pull is the pin's read: the pulls never go stale", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { pollInterval: "200ms", stalePullPeriods: "3" });
    await n.store.putPin({ key: v1.key, sha256: v1.sha256, pinnedAt: new Date().toISOString() });
    await waitFor("the pin", async () => (agent.status().pinned?.key === v1.key ? true : undefined));
    // Five stale periods: a pull completes at every poll.
    await new Promise((r) => setTimeout(r, 3000));
    const { pull } = agent.status();
    expect(pull).toMatchObject({ stale: false, consecutiveFailures: 0 });
    expect(Date.now() - Date.parse(pull!.lastSuccessAt!)).toBeLessThan(1500);
    expect(await healthz(agent.url)).toEqual({ status: 200, body: { ok: true } });
  });
});
