/*
 * After a full pass has published (or found its config already published), the status of the
 * Gateway API objects of servicelb's class is written to their status subresources
 * (docs/gateway-api.md#status): HTTPRoute parents, Gateway and listener conditions,
 * GatewayClass Accepted. Never in the way of a publish: it runs behind the pass, one run at a
 * time (a pass that ends meanwhile replaces the one waiting), bounded by STATUS_WRITE_MS, and
 * every failure is a log line; the next pass writes what this one could not.
 *
 * Idempotent: each object's merged status (core/gateway/status-merge.ts) is compared with the one
 * it holds, as listed by the pass, and written only when they differ.
 *
 * Programmed (docs/gateway-api.md#programmed): this instance remembers, per Gateway, the config key
 * of the first pass that saw the Gateway as it is now (core/gateway/programmed.ts,
 * programmingInput); the Gateway is Programmed once every node that reports to the store runs that
 * config or a later one.
 */

import type { Logger } from "../adapters/log.js";
import type { StatusRead } from "../adapters/store.js";
import { loadKubeConfig } from "../adapters/kube-config.js";
import {
  createStatusWriter,
  type StatusTarget,
  type StatusWriter,
  type WriteOutcome,
} from "../adapters/gateway-status.js";
import { nodeStatusSchema } from "../agent/status-report.js";
import { compareConfigKeys } from "../core/publish/config-key.js";
import { errorMessage } from "../core/error-message.js";
import { type FleetRuns, programmingInput, withProgrammed } from "../core/gateway/programmed.js";
import type { GatewayObjects } from "../core/gateway/schemas.js";
import { CONTROLLER_NAME, type GatewayStatus } from "../core/gateway/status.js";
import { mergeClassStatus, mergeGatewayStatus, mergeRouteStatus, statusDiffers } from "../core/gateway/status-merge.js";

/** The longest one run of status writes takes; what is left is the next pass's. */
export const STATUS_WRITE_MS = 10_000;
/** Status writes in flight at once. */
const CONCURRENCY = 8;

/** What a pass hands over: the status it computed, the objects it listed, and its config's key. */
export interface PassStatus {
  status: GatewayStatus | null;
  objects: GatewayObjects | undefined;
  key: string;
}

export interface GatewayStatusDeps {
  writer: StatusWriter;
  /** The agents' reports (status/<node>.json). */
  readReports: () => Promise<StatusRead>;
  log: Logger;
  timeoutMs?: number;
  now?: () => Date;
}

/** What the reports say of config `key`: every reporting node runs it or a later one, or why not. */
export function fleetRunsConfig(read: StatusRead, key: string): FleetRuns {
  if (read.unread.length > 0) return { runs: false, why: `${read.unread.length} of the nodes' reports cannot be read` };
  if (read.reports.length === 0) return { runs: false, why: "no node has reported to the store" };
  for (const report of read.reports) {
    const parsed = nodeStatusSchema.safeParse(report);
    if (!parsed.success) return { runs: false, why: "a node's report cannot be read" };
    const { node, applied } = parsed.data;
    if (!applied?.key) return { runs: false, why: `node ${node} runs no config from the store yet` };
    if (compareConfigKeys(applied.key, key) < 0) return { runs: false, why: `node ${node} runs ${applied.key}` };
  }
  return { runs: true };
}

interface Job {
  target: StatusTarget;
  held: { resourceVersion: string | undefined; generation: number; status: unknown };
  merge: (status: unknown) => Record<string, unknown>;
}

export class GatewayStatusUpdater {
  /** Per Gateway: what it serves as it is now, and the key of the first config that held it. */
  private readonly since = new Map<string, { input: string; key: string }>();
  private next: PassStatus | undefined;
  private running: Promise<void> | undefined;
  private readonly timeoutMs: number;
  private readonly now: () => Date;

  constructor(private readonly deps: GatewayStatusDeps) {
    this.timeoutMs = deps.timeoutMs ?? STATUS_WRITE_MS;
    this.now = deps.now ?? (() => new Date());
  }

  /** Takes a pass's outcome; the writes run behind it. */
  afterPass(pass: PassStatus): void {
    if (!pass.objects) return;
    this.next = pass;
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
    });
  }

  /** Settles when no run is under way or waiting. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    while (this.next) {
      const pass = this.next;
      this.next = undefined;
      try {
        await this.run(pass);
      } catch (err) {
        this.deps.log.warn({ err }, "Gateway API status not written; the next pass writes it");
      }
    }
  }

  private async run(pass: PassStatus): Promise<void> {
    const objects = pass.objects!;
    const status = pass.status ?? { gatewayClasses: [], gateways: [], httpRoutes: [] };
    const now = this.now().toISOString();
    const gateways = await this.programmed(status, pass.key);
    const jobs: Job[] = [];
    const held = (o: { metadata: { resourceVersion?: string; generation?: number | null }; status?: unknown }) => ({
      resourceVersion: o.metadata.resourceVersion,
      generation: o.metadata.generation ?? 0,
      status: o.status,
    });
    for (const c of objects.gatewayClasses) {
      const desired = status.gatewayClasses.find((s) => s.name === c.metadata.name);
      if (c.spec.controllerName !== CONTROLLER_NAME || !desired) continue;
      jobs.push({
        target: { kind: "GatewayClass", name: c.metadata.name },
        held: held(c),
        merge: (s) => mergeClassStatus(s, desired, now),
      });
    }
    for (const g of objects.gateways) {
      const { namespace, name } = g.metadata;
      const desired = gateways.find((s) => s.namespace === namespace && s.name === name);
      if (!desired) continue;
      jobs.push({
        target: { kind: "Gateway", namespace, name },
        held: held(g),
        merge: (s) => mergeGatewayStatus(s, desired, now),
      });
    }
    for (const r of objects.httpRoutes) {
      const { namespace, name } = r.metadata;
      const parents = status.httpRoutes.find((s) => s.namespace === namespace && s.name === name)?.parents ?? [];
      jobs.push({
        target: { kind: "HTTPRoute", namespace, name },
        held: held(r),
        merge: (s) => mergeRouteStatus(s, parents, namespace, now),
      });
    }
    await this.write(jobs.filter((j) => statusDiffers(j.held.status, j.merge(j.held.status))));
  }

  /** The Gateways' status with Programmed decided by the agents' reports; none when they cannot be read. */
  private async programmed(status: GatewayStatus, key: string) {
    const live = new Set<string>();
    const pending = status.gateways.map((g) => {
      const id = `${g.namespace}/${g.name}`;
      live.add(id);
      const input = programmingInput(g, status.httpRoutes);
      const known = this.since.get(id);
      const since = known?.input === input ? known : { input, key };
      this.since.set(id, since);
      return { gateway: g, since: since.key };
    });
    for (const id of this.since.keys()) if (!live.has(id)) this.since.delete(id);
    const decides = status.gateways.some((g) =>
      [...g.conditions, ...g.listeners.flatMap((l) => l.conditions)].some(
        (c) => c.type === "Programmed" && c.reason === "Pending",
      ),
    );
    if (!decides) return status.gateways;
    let read: StatusRead;
    try {
      read = await this.deps.readReports();
    } catch (err) {
      // Programmed is not flipped on a store that fails for a moment: the Gateways wait for a pass
      // that reads the reports; their routes and classes are written all the same.
      this.deps.log.warn(
        { err: errorMessage(err) },
        "cannot read the agents' reports: the Gateways' status waits for the next pass",
      );
      return [];
    }
    return pending.map(({ gateway, since }) => withProgrammed(gateway, since, fleetRunsConfig(read, since)));
  }

  private async write(jobs: Job[]): Promise<void> {
    if (jobs.length === 0) return;
    const counts: Partial<Record<WriteOutcome | "failed", number>> = {};
    const failures: string[] = [];
    const signal = AbortSignal.timeout(this.timeoutMs);
    let at = 0;
    const worker = async () => {
      while (at < jobs.length && !signal.aborted) {
        const job = jobs[at++]!;
        const { kind, namespace, name } = job.target;
        try {
          const outcome = await this.deps.writer.write(job.target, job.held, job.merge, statusDiffers, signal);
          counts[outcome] = (counts[outcome] ?? 0) + 1;
        } catch (err) {
          counts.failed = (counts.failed ?? 0) + 1;
          if (failures.length < 5)
            failures.push(`${kind} ${namespace ? `${namespace}/` : ""}${name}: ${errorMessage(err)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, jobs.length) }, worker));
    const left = jobs.length - at;
    if (left > 0 || failures.length > 0 || counts.conflict)
      this.deps.log.warn(
        { counts, left, failures },
        `Gateway API status: not every write went through within ${this.timeoutMs} ms; the next pass writes the rest`,
      );
    else this.deps.log.info({ counts }, "Gateway API status written");
  }
}

/** The updater of a reconciler: the cluster its kubeconfig names (read at the first write), the agents' reports in its store. */
export function gatewayStatusUpdater(
  kube: { kubeconfig?: string; context?: string },
  readReports: () => Promise<StatusRead>,
  log: Logger,
): GatewayStatusUpdater {
  let writer: StatusWriter | undefined;
  const open = () => {
    writer ??= createStatusWriter(loadKubeConfig(kube));
    return writer;
  };
  return new GatewayStatusUpdater({
    writer: { write: (...args) => open().write(...args) },
    readReports,
    log,
  });
}
