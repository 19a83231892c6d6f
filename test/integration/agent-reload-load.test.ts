import { Agent as HttpAgent } from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import { echoPods, httpGet, testNode, web, type Echo, type Node } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { requireHaproxy } from "../support/haproxy.js";
import { waitFor } from "../support/net.js";
import { startS3, type TestS3 } from "../support/s3.js";

// "Nothing lost, ever": structural changes reload HAProxy while clients keep sending requests,
// over kept-alive connections and over a new connection per request. Every failed request counts.

const RELOADS = 25;
const CLIENTS_PER_KIND = 4;

let s3: TestS3;
let pods: Echo;
let n: Node;

beforeAll(async () => {
  requireHaproxy();
  s3 = await startS3();
  pods = await echoPods({ "127.0.0.2": "A" });
  n = await testNode(s3);
});

afterAll(async () => {
  n?.cleanup();
  await pods?.close();
  await s3?.stop();
});

interface Tally {
  ok: number;
  failed: string[];
}

/** One client: requests back to back until told to stop; a request fails on an error or any answer but A's 200. */
async function client(agent: HttpAgent | false, running: () => boolean, tally: Tally): Promise<void> {
  for (let i = 0; running(); i++) {
    try {
      const r = await httpGet(n.lb.options.httpPort, `/web/${i}`, agent);
      if (r.status === 200 && r.body === `A /${i}`) tally.ok++;
      else tally.failed.push(`HTTP ${r.status} ${r.body.slice(0, 80)}`);
    } catch (err) {
      tally.failed.push((err as NodeJS.ErrnoException).code ?? (err as Error).message);
    }
  }
}

it(`loses no request over ${RELOADS} reloads under keep-alive and non-keep-alive load`, async () => {
  await n.publish(web("web", pods.port, ["127.0.0.2"]), 100);
  const agent = await n.start();
  const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: CLIENTS_PER_KIND });
  try {
    const reloadsBefore = await n.reloads();
    let running = true;
    const kept: Tally = { ok: 0, failed: [] };
    const fresh: Tally = { ok: 0, failed: [] };
    const clients = [
      ...Array.from({ length: CLIENTS_PER_KIND }, () => client(keepAlive, () => running, kept)),
      ...Array.from({ length: CLIENTS_PER_KIND }, () => client(false, () => running, fresh)),
    ];
    const okAt: number[] = [];
    for (let i = 1; i <= RELOADS; i++) {
      // The balance algorithm flips each time: a changed backend line, which only a reload applies.
      const algorithm = i % 2 === 1 ? "leastconn" : "roundrobin";
      const published = await n.publish(
        [
          service("web", [{ port: 80, targetPort: pods.port }], {
            annotations: { "serviceloadbalancer/lb.algorithm": algorithm },
          }),
          slice("web", [{ port: pods.port }], ["127.0.0.2"]),
        ],
        100 + i,
      );
      expect((await n.notify(agent, published)).status).toBe(202);
      await waitFor(`config ${i} applied`, async () =>
        agent.status().applied?.key === published.key ? true : undefined,
      );
      okAt.push(kept.ok + fresh.ok);
    }
    running = false;
    await Promise.all(clients);

    const reloads = (await n.reloads()) - reloadsBefore;
    expect(reloads).toBeGreaterThanOrEqual(20);
    expect(agent.status().lastError).toBeNull();
    const summary = `keep-alive: ${kept.ok} ok, ${kept.failed.length} failed; new connection: ${fresh.ok} ok, ${fresh.failed.length} failed; reloads: ${reloads}`;
    expect([...kept.failed, ...fresh.failed], summary).toEqual([]);
    // Traffic really flowed through every reload, on both kinds of client.
    expect(kept.ok, summary).toBeGreaterThan(RELOADS * 10);
    expect(fresh.ok, summary).toBeGreaterThan(RELOADS * 10);
    expect(
      okAt.every((ok, i) => i === 0 || ok > okAt[i - 1]!),
      summary,
    ).toBe(true);
  } finally {
    keepAlive.destroy();
    await agent.stop();
  }
});
