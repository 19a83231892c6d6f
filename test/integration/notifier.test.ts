/*
 * The notifier against real sockets: agents on loopback HTTP servers, and the agent Service's
 * EndpointSlices served by the Kubernetes API emulator to the real client.
 */

import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { createNotifier, DISCOVERY_TTL_MS, type NotifierOptions } from "../../shared/adapters/notifier.js";
import { slice } from "../support/fixtures.js";
import { TestKubeApi } from "../support/kube-api.js";

const log = pino({ level: "silent" });
const payload = { key: "configs/k", sha256: "0".repeat(64), revision: "7" };

/** One HTTP server standing for many agents (`/a<i>/notify`), answering after `delayMs` with `status`. */
interface Fleet {
  urls: string[];
  pinged: Set<string>;
  maxInFlight: number;
  close(): Promise<void>;
}

async function fleet(n: number, opts: { delayMs?: number; status?: number } = {}): Promise<Fleet> {
  let inFlight = 0;
  const f = { pinged: new Set<string>(), maxInFlight: 0 };
  const server: Server = createServer((req, res) => {
    inFlight++;
    f.maxInFlight = Math.max(f.maxInFlight, inFlight);
    req.resume();
    setTimeout(() => {
      inFlight--;
      f.pinged.add(req.url!.split("/")[1]!);
      res.statusCode = opts.status ?? 202;
      res.end();
    }, opts.delayMs ?? 0);
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    ...f,
    get pinged() {
      return f.pinged;
    },
    get maxInFlight() {
      return f.maxInFlight;
    },
    urls: Array.from({ length: n }, (_, i) => `http://127.0.0.1:${port}/a${i}`),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const options = (o: Partial<NotifierOptions>): NotifierOptions => ({
  agents: [],
  concurrency: 64,
  deadlineMs: 5000,
  ...o,
});

describe("pings", () => {
  const open: Fleet[] = [];
  afterEach(async () => {
    for (const f of open.splice(0)) await f.close();
  });

  it("pings every agent, never more at once than the bound", async () => {
    const f = await fleet(300, { delayMs: 10 });
    open.push(f);
    const report = await createNotifier(options({ agents: f.urls, concurrency: 16 }), log).notify(payload);
    expect(report).toEqual({ agents: 300, ok: 300, failed: 0, unpinged: 0, failures: [], discoveryError: undefined });
    expect(f.pinged.size).toBe(300);
    expect(f.maxInFlight).toBeLessThanOrEqual(16);
    expect(f.maxInFlight).toBeGreaterThan(1);
  });

  it("stops at the deadline and counts the agents it did not ping: they converge by their poll", async () => {
    const f = await fleet(40, { delayMs: 150 });
    open.push(f);
    const report = await createNotifier(options({ agents: f.urls, concurrency: 4, deadlineMs: 400 }), log).notify(
      payload,
    );
    // The pings in flight when the deadline came are cut there, not at their own timeout.
    expect(report.failures.map((p) => p.error)).toEqual(Array(report.failed).fill("timed out"));
    expect(report.unpinged).toBeGreaterThan(0);
    expect(report.ok + report.failed + report.unpinged).toBe(40);
    expect(f.pinged.size).toBeLessThan(40);
  });

  it("reports a bounded number of failures however many agents fail", async () => {
    const f = await fleet(50, { status: 500 });
    open.push(f);
    const report = await createNotifier(options({ agents: f.urls }), log).notify(payload);
    expect(report).toMatchObject({ agents: 50, ok: 0, failed: 50, unpinged: 0 });
    expect(report.failures).toHaveLength(20);
    expect(report.failures[0]).toMatchObject({ ok: false, status: 500, error: "HTTP 500" });
  });
});

describe("discovery through the agent Service", () => {
  let api: TestKubeApi;
  let dir: string;
  let kubeconfig: string;
  let agents: Fleet;
  let lists = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "servicelb-notifier-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    api = await new TestKubeApi().start();
    kubeconfig = await api.writeKubeconfig({ dir: await mkdtemp(join(dir, "kube-")) });
    agents = await fleet(1);
    const port = Number(new URL(agents.urls[0]!).port);
    api.upsert(
      "EndpointSlice",
      slice("agent", [{ name: "agent", port }], ["127.0.0.1"], { namespace: "servicelb" }) as unknown as KubeObject,
    );
    lists = 0;
    api.delay({ ms: 0, match: (req) => (req.path.endsWith("/endpointslices") ? lists++ >= 0 : false) });
  });
  afterEach(async () => {
    await agents.close();
    await api.stop();
  });

  it("lists the agent Service once per TTL, not once per change", async () => {
    let clock = 0;
    const notifier = createNotifier(
      options({
        agentService: { namespace: "servicelb", name: "agent" },
        kube: { kubeconfig },
        now: () => clock,
      }),
      log,
    );
    for (let i = 0; i < 5; i++) expect(await notifier.notify(payload)).toMatchObject({ agents: 1, ok: 1 });
    expect(lists).toBe(1);
    clock += DISCOVERY_TTL_MS;
    await notifier.notify(payload);
    expect(lists).toBe(2);
  });

  it("keeps pinging the agents it last listed while the list fails", async () => {
    let clock = 0;
    const notifier = createNotifier(
      options({ agentService: { namespace: "servicelb", name: "agent" }, kube: { kubeconfig }, now: () => clock }),
      log,
    );
    await notifier.notify(payload);
    clock += DISCOVERY_TTL_MS;
    api.forbid("endpointslices");
    const report = await notifier.notify(payload);
    expect(report).toMatchObject({ agents: 1, ok: 1, discoveryError: expect.stringContaining("HTTP 403") });
  });
});
