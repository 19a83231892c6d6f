import { Agent as HttpAgent } from "node:http";
import { assignSlots } from "../../shared/core/model/slots.js";
import { httpGet } from "./agent.js";

/**
 * A rollout under load, shared by test/integration/agent-rollout-load.test.ts and bench/agent:
 * one Service's endpoints changed the way Deployments change them, while keep-alive and
 * new-connection clients send requests. Every answer is checked to come from a pod that was an
 * endpoint between the request's start and its end; a 503 counts as right only while the
 * Service had no ready endpoint.
 */

/** Pods 127.0.0.2 … 127.0.0.17 (loopback is 127/8 on Linux), answering as P2 … P17. */
export const ROLLOUT_PODS = Array.from({ length: 16 }, (_, i) => `127.0.0.${i + 2}`);
export const podName = (ip: string) => `P${ip.split(".")[3]}`;

export interface RolloutStep {
  kind: string;
  ips: string[];
  /** Published right after the previous step, without waiting for it to be applied (no readiness gap). */
  burst: boolean;
}

/** The pods' slot when each is a Service's only endpoint in a backend of `minSlots` slots. */
function slotOf(ip: string, port: number, minSlots: number): number {
  return assignSlots([`${ip}:${port}`], minSlots).findIndex((address) => address !== null);
}

function pairBy(pred: (a: string, b: string) => boolean): [string, string] {
  for (const a of ROLLOUT_PODS) for (const b of ROLLOUT_PODS) if (a !== b && pred(a, b)) return [a, b];
  throw new Error("no such pair of pods");
}

/**
 * 100 changes: 20 in-place moves of the only pod (the two pods take the same slot), 20 moves
 * between slots, 20 disjoint swaps of two pods, 15 fast rolls {a} → {a,b} → {b} (30 changes) and
 * 5 scales to zero and back (10 changes). The first set is `initial`.
 */
export function rolloutSteps(port: number, minSlots = 4): { initial: string[]; steps: RolloutStep[] } {
  const steps: RolloutStep[] = [];
  const add = (kind: string, ips: string[], burst = false) => steps.push({ kind, ips, burst });
  const [x, y] = pairBy((a, b) => slotOf(a, port, minSlots) === slotOf(b, port, minSlots));
  const [u, v] = pairBy((a, b) => slotOf(a, port, minSlots) !== slotOf(b, port, minSlots));
  for (let i = 0; i < 20; i++) add("in-place move", [i % 2 === 0 ? y : x]);
  for (let i = 0; i < 20; i++) add("move between slots", [i % 2 === 0 ? v : u]);
  const [a, b, c, d] = ROLLOUT_PODS.filter((ip) => ip !== x && ip !== y) as [string, string, string, string];
  for (let i = 0; i < 20; i++) add("disjoint swap", i % 2 === 0 ? [a, b] : [c, d]);
  for (let i = 0; i < 15; i++) {
    const [from, to] = i % 2 === 0 ? [a, b] : [b, a];
    add("fast roll", [from, to]);
    add("fast roll", [to], true);
  }
  for (let i = 0; i < 5; i++) {
    add("scale to zero", []);
    add("scale from zero", [i % 2 === 0 ? b : a]);
  }
  return { initial: [x], steps };
}

/**
 * The ready endpoints of a Deployment's rolling update from `old` to as many `next` pods, as
 * maxSurge `surge` with maxUnavailable 0 makes them: `surge` new pods become ready, then as many
 * of the oldest leave, until every pod is new.
 */
export function rollingUpdate(old: readonly string[], next: readonly string[], surge: number): string[][] {
  const sets: string[][] = [];
  let current = [...old];
  for (let added = 0; added < next.length; ) {
    const batch = next.slice(added, added + surge);
    added += batch.length;
    current = [...current, ...batch];
    sets.push(current);
    current = current.slice(batch.length);
    sets.push(current);
  }
  return sets;
}

export interface RolloutTally {
  ok: number;
  /** 503s while the Service had no ready endpoint: the right answer then. */
  atZero: number;
  failed: string[];
}

export interface RolloutDriver {
  httpPort: number;
  /** Path of the Service on the load balancer, e.g. "/web". */
  path: string;
  /** Renders and stores the Service with these endpoints; returns what to notify. */
  publish(ips: string[], step: number): Promise<{ key: string; sha256: string }>;
  notify(published: { key: string; sha256: string }): Promise<void>;
  /** Resolves once the agent runs this key. */
  applied(key: string): Promise<void>;
  /** HAProxy's reload count so far. */
  reloads(): Promise<number>;
  clientsPerKind?: number;
}

export interface RolloutResult {
  keepAlive: RolloutTally;
  fresh: RolloutTally;
  changes: number;
  /** Reloads between the first change and the last one applied. */
  reloads: number;
}

/** Runs `steps` after `initial` is served, under load; HAProxy is at generation `applied`..`published` at any time. */
export async function runRollout(d: RolloutDriver, initial: string[], steps: RolloutStep[]): Promise<RolloutResult> {
  const sets: string[][] = [initial];
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
  const perKind = d.clientsPerKind ?? 4;
  const keepAliveAgent = new HttpAgent({ keepAlive: true, maxSockets: perKind });
  let running = true;
  const client = async (httpAgent: HttpAgent | false, tally: RolloutTally) => {
    for (let i = 0; running; i++) {
      const from = applied;
      let answer: string;
      try {
        const r = await httpGet(d.httpPort, `${d.path}/${i}`, httpAgent);
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

  const first = await d.publish(initial, 0);
  await d.notify(first);
  await d.applied(first.key);
  const reloadsBefore = await d.reloads();
  const keepAlive: RolloutTally = { ok: 0, atZero: 0, failed: [] };
  const fresh: RolloutTally = { ok: 0, atZero: 0, failed: [] };
  const clients = [
    ...Array.from({ length: perKind }, () => client(keepAliveAgent, keepAlive)),
    ...Array.from({ length: perKind }, () => client(false, fresh)),
  ];
  try {
    let pending: { key: string; generation: number } | null = null;
    const waitApplied = async (p: { key: string; generation: number }) => {
      await d.applied(p.key);
      applied = p.generation;
    };
    for (const [i, step] of steps.entries()) {
      if (pending && !step.burst) await waitApplied(pending);
      sets.push(step.ips);
      published = sets.length - 1;
      const result = await d.publish(step.ips, i + 1);
      await d.notify(result);
      pending = { key: result.key, generation: published };
    }
    if (pending) await waitApplied(pending);
    // The last generation gets requests too.
    const answers = () => [keepAlive, fresh].reduce((n, t) => n + t.ok + t.atZero + t.failed.length, 0);
    const atEnd = answers();
    while (answers() < atEnd + 50) await new Promise((r) => setTimeout(r, 10));
  } finally {
    running = false;
    await Promise.all(clients);
    keepAliveAgent.destroy();
  }
  return { keepAlive, fresh, changes: steps.length, reloads: (await d.reloads()) - reloadsBefore };
}

/**
 * What a rollout that dropped nothing shows, as a summary and the ways this one fell short: no
 * failed request on either kind of client, no reload, no agent error, and traffic that really flowed
 * (more than five answers per change on each kind).
 */
export function rolloutShortfalls(r: RolloutResult, agentError: unknown): { summary: string; shortfalls: string[] } {
  const { keepAlive, fresh, reloads, changes } = r;
  const summary = `keep-alive: ${keepAlive.ok} ok, ${keepAlive.atZero} 503 at zero, ${keepAlive.failed.length} failed; new connection: ${fresh.ok} ok, ${fresh.atZero} 503 at zero, ${fresh.failed.length} failed; reloads: ${reloads}`;
  const failed = [...keepAlive.failed, ...fresh.failed];
  const shortfalls = [
    ...(failed.length > 0 ? [`${failed.length} failed requests, first: ${failed.slice(0, 8).join(" | ")}`] : []),
    ...(reloads > 0 ? [`${reloads} reloads`] : []),
    ...(agentError ? [`agent error: ${JSON.stringify(agentError)}`] : []),
    ...(keepAlive.ok <= changes * 5 ? [`only ${keepAlive.ok} keep-alive answers`] : []),
    ...(fresh.ok <= changes * 5 ? [`only ${fresh.ok} new-connection answers`] : []),
  ];
  return { summary, shortfalls };
}
