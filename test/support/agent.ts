import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Agent as HttpAgent } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { createLogger } from "../../shared/adapters/log.js";
import { createObjectStore, type ObjectStore, type PublishResult } from "../../shared/adapters/store.js";
import { startAgent, type Agent, type AgentDeps } from "../../shared/agent/agent.js";
import { parseAgentOptions, type AgentOptions } from "../../shared/agent/options.js";
import { RenderContext } from "../../shared/app/render-context.js";
import { parseConfigKey } from "../../shared/core/publish/config-key.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "./fixtures.js";
import { afterAll, afterEach, beforeAll } from "vitest";
import { loopbackOptions, requireHaproxy, type LoopbackSetup } from "./haproxy.js";
import { waitFor } from "./net.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "./s3.js";
import type { DigestKind } from "../../shared/core/publish/config-digest.js";

/** Agent tests: one node's world in a temp dir — its store prefix, sockets, config path and token. */

export const TOKEN = "test-notify-token-0123456789";

export interface Node {
  dir: string;
  lb: LoopbackSetup;
  store: ObjectStore;
  prefix: string;
  renderContext: RenderContext;
  /** Options of an agent for this node; `extra` uses the flag names (camelCase). */
  options(extra?: Record<string, unknown>): AgentOptions;
  start(extra?: Record<string, unknown>, deps?: AgentDeps): Promise<Agent>;
  /**
   * Renders the cluster `items` at `revision` and publishes it (by a sha256 digest unless told), as
   * the reconcile function does; `chunked`: in chunks (tree1), as it does for a fleet that reads them.
   */
  publish(items: unknown[], revision: number, digest?: DigestKind, chunked?: boolean): Promise<PublishResult>;
  /** POST /notify with the published key, as the notifier does. */
  notify(
    agent: Agent,
    published: Pick<PublishResult, "key" | "sha256">,
    token?: string | null,
  ): Promise<{ status: number; body: string }>;
  masterSocket: string;
  configPath: string;
  reloads(): Promise<number>;
  /** GET path through this node's HAProxy HTTP frontend, one connection per request. */
  get(path: string): Promise<{ status: number; body: string }>;
  /** GET with a Host header. */
  getHost(host: string, path: string): Promise<{ status: number; body: string }>;
  /** The config the last `publish` rendered. */
  lastConfig(): string;
  cleanup(): void;
}

let nodes = 0;

export async function testNode(s3: TestS3, renderExtra: Record<string, unknown> = {}): Promise<Node> {
  // No spare backends unless a test asks: agent tests add a Service to make a change that needs a reload.
  const lb = await loopbackOptions({ hardStopAfter: "10s", spareBackends: 0, ...renderExtra });
  const dir = mkdtempSync(join(tmpdir(), "servicelb-agent-"));
  const prefix = `node-${process.pid}-${++nodes}`;
  const store = createObjectStore({
    url: `s3://${s3.bucket}/${prefix}`,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
    timeoutMs: 2000,
  });
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, `${TOKEN}\n`);
  const renderContext = new RenderContext(lb.options);
  let lastConfig = "";
  const masterSocket = join(dir, "master.sock");
  const configPath = join(dir, "etc", "haproxy.cfg");
  const options = (extra: Record<string, unknown> = {}) =>
    parseAgentOptions(
      {},
      {
        store: `s3://${s3.bucket}/${prefix}`,
        storeEndpoint: s3.endpoint,
        storePathStyle: "true",
        nodeName: `node-${nodes}`,
        listen: "127.0.0.1:0",
        configPath,
        stateDir: join(dir, "state"),
        masterSocket,
        pollInterval: "60s",
        minReloadInterval: "0ms",
        statusInterval: "60s",
        notifyTokenFile: tokenFile,
        ...extra,
      },
    );
  const node: Node = {
    dir,
    lb,
    store,
    prefix,
    renderContext,
    masterSocket,
    configPath,
    options,
    start: (extra, deps = {}) =>
      startAgent(options(extra), {
        log: createLogger("agent-test", process.env.AGENT_TEST_LOG ?? "silent"),
        store,
        haproxy: { restartInitialDelayMs: 200, stopGraceMs: 3000, killGraceMs: 2000 },
        backoff: { initialMs: 60_000, maxMs: 60_000 },
        haproxyLog: () => undefined,
        ...deps,
      }),
    async publish(items, revision, digest, chunked) {
      const rendered = renderContext.render(snapshotFromDocuments([list(items, String(revision))]));
      lastConfig = rendered.config;
      return store.publish({
        config: rendered.config,
        ...(digest ? { digest } : {}),
        ...(chunked ? { chunked } : {}),
        revision: String(revision),
        generator: "servicelb/test",
        ...(rendered.layout ? { layout: rendered.layout } : {}),
      });
    },
    async notify(agent, published, token = TOKEN) {
      const revision = parseConfigKey(published.key)?.revision.toString() ?? "0";
      const res = await fetch(`${agent.url}/notify`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
        },
        body: JSON.stringify({ key: published.key, sha256: published.sha256, revision }),
      });
      return { status: res.status, body: await res.text() };
    },
    reloads: async () => (await showProc(masterSocket)).master.reloads,
    get: (path) => httpGet(lb.options.httpPort, path),
    getHost: (host, path) => httpGet(lb.options.httpPort, path, false, { host }),
    lastConfig: () => lastConfig,
    cleanup() {
      store.close();
      lb.cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return node;
}

/** A Service `name` on port 80 whose pods are `hosts`, all listening on targetPort. */
export function web(name: string, targetPort: number, hosts: string[]): unknown[] {
  return [service(name, [{ port: 80, targetPort }]), slice(name, [{ port: targetPort }], hosts)];
}

export interface Echo {
  port: number;
  close(): Promise<void>;
}

/**
 * HTTP servers that answer "<name> <path>", one per host, all on one port (pods of one Service
 * differ by address, not port). Loopback is 127.0.0.0/8 on Linux, so 127.0.0.2, .3, ... work.
 */
export async function echoPods(pods: Record<string, string>, opts: { slowMs?: number } = {}): Promise<Echo> {
  for (let attempt = 0; ; attempt++) {
    const servers = Object.entries(pods).map(([host, name]) => {
      const s = createServer((req, res) => {
        // A path under /slow is answered after slowMs: a request still in flight when the test acts.
        const answer = () => res.end(`${name} ${req.url}`);
        if (opts.slowMs && req.url?.includes("/slow")) setTimeout(answer, opts.slowMs);
        else answer();
      });
      s.keepAliveTimeout = 65_000;
      return { host, s };
    });
    let port = 0;
    try {
      for (const { host, s } of servers) {
        await new Promise<void>((resolve, reject) => {
          s.once("error", reject);
          s.listen(port, host, () => resolve());
        });
        port = (s.address() as AddressInfo).port;
      }
      return {
        port,
        close: async () => {
          for (const { s } of servers) {
            s.closeAllConnections();
            await new Promise<void>((r) => s.close(() => r()));
          }
        },
      };
    } catch (err) {
      for (const { s } of servers) if (s.listening) s.close();
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt > 20) throw err;
    }
  }
}

export function httpGet(
  port: number,
  path: string,
  agent: HttpAgent | false = false,
  headers: Record<string, string> = {},
  host = "127.0.0.1",
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, agent, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error(`GET ${path} on ${host}:${port} timed out`)));
    req.end();
  });
}

/** The sum of a counter's values (all label sets, or those matching `labels`). */
export async function count(
  metric: { get(): Promise<{ values: Array<{ value: number; labels: Partial<Record<string, string | number>> }> }> },
  labels: Record<string, string> = {},
): Promise<number> {
  const { values } = await metric.get();
  return values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((a, v) => a + v.value, 0);
}

/** The echo pods of agent tests: one port, three addresses, so endpoints differ by address as in a cluster. */
export const A = "127.0.0.2";
export const B = "127.0.0.3";
export const C = "127.0.0.4";

/**
 * An agent test file's world: one s3rver and the echo pods A, B and C for the file, and nodes,
 * agents and whatever else is pushed to `cleanups` torn down after each test. Call at top level.
 */
export function agentWorld() {
  let s3: TestS3 | undefined;
  let pods: Echo | undefined;
  const cleanups: Array<() => Promise<void> | void> = [];
  beforeAll(async () => {
    requireHaproxy();
    s3 = await startS3();
    pods = await echoPods({ [A]: "A", [B]: "B", [C]: "C" });
  });
  afterAll(async () => {
    await pods?.close();
    await s3?.stop();
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return {
    get s3(): TestS3 {
      return s3!;
    },
    get pods(): Echo {
      return pods!;
    },
    cleanups,
    async node(renderExtra: Record<string, unknown> = {}): Promise<Node> {
      const n = await testNode(s3!, renderExtra);
      cleanups.push(() => n.cleanup());
      return n;
    },
    async start(n: Node, extra: Record<string, unknown> = {}, deps: AgentDeps = {}): Promise<Agent> {
      const agent = await n.start(extra, deps);
      cleanups.push(() => agent.stop());
      return agent;
    },
    /** Waits until `path` is answered by pod `by`. */
    served(n: Node, path: string, by: string) {
      return waitFor(`${path} served by ${by}`, async () => {
        const r = await n.get(path);
        return r.status === 200 && r.body.startsWith(`${by} `) ? r : undefined;
      });
    },
    /** Which pods answer `path` over `times` requests. */
    async answering(n: Node, path: string, times = 12): Promise<string[]> {
      const seen = new Set<string>();
      for (let i = 0; i < times; i++) seen.add((await n.get(path)).body.split(" ")[0]!);
      return [...seen].sort();
    },
    appliedKey: (agent: Agent, key: string) =>
      waitFor(`applied ${key}`, async () => (agent.status().applied?.key === key ? true : undefined)),
  };
}
