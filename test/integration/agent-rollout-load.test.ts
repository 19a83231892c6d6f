import { Agent as HttpAgent } from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import { assignSlots } from "../../shared/core/slots.js";
import { echoPods, httpGet, testNode, web, type Echo, type Node } from "../support/agent.js";
import { requireHaproxy } from "../support/haproxy.js";
import { waitFor } from "../support/net.js";
import { startS3, type TestS3 } from "../support/s3.js";

// "A rollout drops nothing": endpoint changes the way Deployments make them, applied through the
// runtime API while clients keep sending requests over kept-alive connections and over a new
// connection per request. Every answer must come from a pod that was an endpoint around the time
// of the request; every error counts; HAProxy is never reloaded.

const CLIENTS_PER_KIND = 4;
/** Pods 127.0.0.2 … 127.0.0.17, named P2 … P17. */
const POOL = Array.from({ length: 16 }, (_, i) => `127.0.0.${i + 2}`);
const podName = (ip: string) => `P${ip.split(".")[3]}`;

let s3: TestS3;
let pods: Echo;
let n: Node;

beforeAll(async () => {
  requireHaproxy();
  s3 = await startS3();
  pods = await echoPods(Object.fromEntries(POOL.map((ip) => [ip, podName(ip)])));
  n = await testNode(s3);
});

afterAll(async () => {
  n?.cleanup();
  await pods?.close();
  await s3?.stop();
});

/** The slot (of a 4-slot backend) each pod takes when it is the Service's only endpoint. */
function slotOf(ip: string): number {
  return assignSlots([`${ip}:${pods.port}`], 4, false).findIndex((s) => s.address !== null);
}

/**
 * The rollout: endpoint sets one after the other. `burst` marks a set published right after the
 * previous one, without waiting for the agent to apply it (a fast roll with no readiness gap).
 */
function rollout(): Array<{ ips: string[]; burst: boolean; kind: string }> {
  const steps: Array<{ ips: string[]; burst: boolean; kind: string }> = [];
  const add = (kind: string, ips: string[], burst = false) => steps.push({ kind, ips, burst });
  // Two pods that take the same slot: the only endpoint moves in place.
  const [x, y] = pairBy((a, b) => slotOf(a) === slotOf(b));
  // Two pods in different slots: the only endpoint moves between slots.
  const [u, v] = pairBy((a, b) => slotOf(a) !== slotOf(b));
  for (let i = 0; i < 20; i++) add("in-place move", [i % 2 === 0 ? y : x]);
  for (let i = 0; i < 20; i++) add("move between slots", [i % 2 === 0 ? v : u]);
  const [a, b, c, d] = POOL.filter((ip) => ![x, y].includes(ip)) as [string, string, string, string];
  for (let i = 0; i < 20; i++) add("disjoint swap", i % 2 === 0 ? [a, b] : [c, d]);
  // {a} → {a,b} → {b}, the second published at once: the old pod goes as soon as the new one is in.
  for (let i = 0; i < 15; i++) {
    const [from, to] = i % 2 === 0 ? [a, b] : [b, a];
    add("fast roll", [from, to]);
    add("fast roll", [to], true);
  }
  for (let i = 0; i < 5; i++) {
    add("scale to zero", []);
    add("scale from zero", [i % 2 === 0 ? b : a]);
  }
  return steps;
}

function pairBy(pred: (a: string, b: string) => boolean): [string, string] {
  for (const a of POOL) for (const b of POOL) if (a !== b && pred(a, b)) return [a, b];
  throw new Error("no such pair of pods");
}

interface Tally {
  ok: number;
  /** 503s while the Service had no ready endpoint: the right answer then. */
  atZero: number;
  failed: string[];
}

it("drops no request and reloads nothing over 100 endpoint changes of a rollout under load", async () => {
  const steps = rollout();
  expect(steps.length).toBe(100);
  // sets[g]: the endpoint set of generation g. HAProxy runs a generation between `applied` and `published`.
  const first = [steps[0]!.ips[0] === POOL[0] ? POOL[1]! : POOL[0]!];
  const sets: string[][] = [first];
  let published = 0;
  let applied = 0;
  const allowed = (from: number, to: number) => {
    const names = new Set<string>();
    let zero = false;
    for (let g = from; g <= to; g++) {
      for (const ip of sets[g]!) names.add(podName(ip));
      if (sets[g]!.length === 0) zero = true;
    }
    return { names, zero };
  };

  const key0 = (await n.publish(web("web", pods.port, first), 1000)).key;
  const agent = await n.start();
  await waitFor("first config applied", async () => (agent.status().applied?.key === key0 ? true : undefined));
  const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: CLIENTS_PER_KIND });

  const client = async (httpAgent: HttpAgent | false, running: () => boolean, tally: Tally) => {
    for (let i = 0; running(); i++) {
      const from = applied;
      let answer: string;
      try {
        const r = await httpGet(n.lb.options.httpPort, `/web/${i}`, httpAgent);
        const { names, zero } = allowed(from, published);
        const [pod, path] = r.body.split(" ");
        if (r.status === 200 && names.has(pod!) && path === `/${i}`) {
          tally.ok++;
          continue;
        }
        if (r.status === 503 && zero) {
          tally.atZero++;
          continue;
        }
        answer = `HTTP ${r.status} ${r.body.slice(0, 60)} (allowed: ${[...names].join(",") || "none"})`;
      } catch (err) {
        answer = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      }
      tally.failed.push(`generations ${from}..${published}: ${answer}`);
    }
  };

  try {
    const reloadsBefore = await n.reloads();
    let running = true;
    const kept: Tally = { ok: 0, atZero: 0, failed: [] };
    const fresh: Tally = { ok: 0, atZero: 0, failed: [] };
    const clients = [
      ...Array.from({ length: CLIENTS_PER_KIND }, () => client(keepAlive, () => running, kept)),
      ...Array.from({ length: CLIENTS_PER_KIND }, () => client(false, () => running, fresh)),
    ];
    let pending: { key: string; generation: number } | null = null;
    const waitApplied = async (p: { key: string; generation: number }) => {
      await waitFor(`generation ${p.generation} applied`, async () => (agent.status().applied?.key === p.key ? true : undefined), 20_000);
      applied = p.generation;
    };
    for (const [i, step] of steps.entries()) {
      // The next set is published only once the previous one is applied, unless it is a burst.
      if (pending && !step.burst) await waitApplied(pending);
      sets.push(step.ips);
      published = sets.length - 1;
      const result = await n.publish(web("web", pods.port, step.ips), 1001 + i);
      expect(result.status, `step ${i} (${step.kind})`).toBe("published");
      expect((await n.notify(agent, result)).status).toBe(202);
      pending = { key: result.key, generation: published };
    }
    await waitApplied(pending!);
    // Let the clients see the last generation too.
    const okAtEnd = kept.ok + fresh.ok;
    await waitFor("traffic after the last change", async () => (kept.ok + fresh.ok > okAtEnd + 50 ? true : undefined));
    running = false;
    await Promise.all(clients);

    const reloads = (await n.reloads()) - reloadsBefore;
    const summary = `keep-alive: ${kept.ok} ok, ${kept.atZero} 503 at zero, ${kept.failed.length} failed; new connection: ${fresh.ok} ok, ${fresh.atZero} 503 at zero, ${fresh.failed.length} failed; reloads: ${reloads}`;
    expect([...kept.failed, ...fresh.failed].slice(0, 20), summary).toEqual([]);
    expect(reloads, summary).toBe(0);
    expect(agent.status().lastError, summary).toBeNull();
    // Traffic really flowed on both kinds of client.
    expect(kept.ok, summary).toBeGreaterThan(steps.length * 5);
    expect(fresh.ok, summary).toBeGreaterThan(steps.length * 5);
  } finally {
    keepAlive.destroy();
    await agent.stop();
  }
});
