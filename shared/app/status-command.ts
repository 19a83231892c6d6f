/*
 * `servicelb status [--format text|json]`: fleet convergence at a glance. For every node that
 * reported to the store (status/<node>.json): the config it runs, whether that is the newest
 * published one, its last error and how old its report is. A report older than three of the
 * node's own report intervals is marked stale: the agent is gone or cannot reach the store.
 * While a pin is set, the pinned config is what every node should run. Newer keys that are not
 * trusted or whose objects do not verify are listed: they are skipped by the publisher and the
 * agents, and a node that runs one is behind. How the reconcile function's last recorded pass
 * went (reconcile.json): a node is only as current as the function that publishes for it. Which
 * config digests the fleet verifies says whether publishers may use tree1 (app/agent-reports.ts),
 * and which node keeps them on sha256.
 * Exits 3 (with the reasons on stderr) unless every node serves the newest config and the
 * function's last pass succeeded, as `kubectl rollout status` fails until a rollout is done.
 */

import { type ConfigHead, type PassRecord, type Pin, type SkippedKey, StoreError } from "../adapters/store.js";
import { openStore } from "../adapters/open-store.js";
import { compareStrings } from "../core/compare.js";
import { compareConfigKeys } from "../core/config-key.js";
import { nodeStatusSchema } from "../agent/node-status.js";
import { loadFunctionSettings, requireStore } from "./function-options.js";
import { formatTable } from "./text-table.js";
import { digestForFleet } from "./agent-reports.js";
import { type DigestKind, digestKind } from "../core/config-digest.js";

export interface NodeRow {
  node: string;
  key: string | null;
  revision: string | null;
  sha256: string | null;
  how: string | null;
  appliedAt: string | null;
  /**
   * Runs no config, an unknown one, a skipped one, or one older than the newest published (not
   * the pinned one while pinned).
   */
  behind: boolean;
  reportedAt: string;
  ageSeconds: number;
  stale: boolean;
  haproxyRunning: boolean;
  lastError: { stage: string; key: string | null; message: string; at: string } | null;
  /** The config digests the agent verifies; agents from before tree1 report none (sha256 only). */
  digests: string[];
}

export interface FleetStatus {
  newest: { key: string; revision: string } | null;
  pin: Pin | null;
  /** Keys newer than the newest verified config that do not verify (reported by the store or an agent). */
  skipped: SkippedKey[];
  nodes: NodeRow[];
  /** Reports that are not agent status documents. */
  unreadable: string[];
  /** The digest publishers in `auto` may use by these reports, and why not tree1. */
  digest: { kind: DigestKind; reason?: string };
  /** The reconcile function's last recorded pass; null before its first (or from a function before the record). */
  function: PassRecord | null;
  /** Why the function's record cannot be read, when it cannot. */
  functionUnreadable?: string;
}

export function fleetStatus(
  newest: ConfigHead | null,
  reports: readonly unknown[],
  now: number,
  store: { pin?: Pin | null; skipped?: SkippedKey[]; pass?: PassRecord | null; passUnreadable?: string } = {},
): FleetStatus {
  const pin = store.pin ?? null;
  const skipped = new Map((store.skipped ?? []).map((s) => [s.key, s]));
  // Judged by the store alone: an agent's own list may name a key that is fine now (it came back).
  const distrusted = new Set(skipped.keys());
  const nodes: NodeRow[] = [];
  const unreadable: string[] = [];
  for (const report of reports) {
    const parsed = nodeStatusSchema.safeParse(report);
    if (!parsed.success) {
      unreadable.push(JSON.stringify(report).slice(0, 120));
      continue;
    }
    const s = parsed.data;
    const ageSeconds = Math.max(0, Math.round((now - Date.parse(s.reportedAt)) / 1000));
    const key = s.applied?.key ?? null;
    nodes.push({
      node: s.node,
      key,
      revision: s.applied?.revision ?? null,
      sha256: s.applied?.sha256 ?? null,
      how: s.applied?.how ?? null,
      appliedAt: s.applied?.appliedAt ?? null,
      behind: pin
        ? key !== pin.key
        : newest !== null && (key === null || distrusted.has(key) || compareConfigKeys(key, newest.key) < 0),
      reportedAt: s.reportedAt,
      ageSeconds,
      stale: ageSeconds > 3 * s.reportIntervalSeconds,
      haproxyRunning: s.haproxy.running,
      lastError: s.lastError,
      digests: s.digests,
    });
    for (const k of s.skipped) if (!skipped.has(k.key)) skipped.set(k.key, k);
  }
  nodes.sort((a, b) => compareStrings(a.node, b.node));
  return {
    newest: newest && { key: newest.key, revision: newest.revision },
    pin,
    skipped: [...skipped.values()],
    nodes,
    unreadable,
    digest: digestForFleet(reports),
    function: store.pass ?? null,
    ...(store.passUnreadable !== undefined ? { functionUnreadable: store.passUnreadable } : {}),
  };
}

/** `status` exits with this when the fleet has not converged, so that scripts and CI can wait on it. */
export const NOT_CONVERGED_EXIT = 3;

/**
 * Why the fleet is not serving the newest config, one line per problem, or nothing when it is:
 * the function's last recorded pass failed; a node behind, with HAProxy down, or whose report is
 * stale; or no node reporting at all.
 */
export function notConverged(f: FleetStatus): string[] {
  const fn = functionProblem(f);
  const problems = fn === null ? [] : [`function: ${fn}`];
  if (f.nodes.length === 0) return [...problems, "no agent has reported to the store"];
  return problems.concat(
    f.nodes.flatMap((n) => {
      const why = [
        n.behind && "behind the newest config",
        !n.haproxyRunning && "HAProxy down",
        n.stale && "report stale (agent gone or cut off from the store)",
      ].filter(Boolean);
      return why.length === 0 ? [] : [`${n.node}: ${why.join(", ")}`];
    }),
  );
}

/** What is wrong with the function's passes, or null when its last recorded pass succeeded (or none is recorded). */
function functionProblem(f: FleetStatus): string | null {
  if (f.functionUnreadable !== undefined) return `its record cannot be read: ${f.functionUnreadable}`;
  const failure = f.function?.failure;
  if (!failure) return null;
  const passes = failure.passes === 1 ? "1 pass failed" : `${failure.passes} passes failed`;
  const since = failure.passes === 1 ? "" : ` since ${failure.since}`;
  return `${passes}${since}, the last at ${f.function!.at} at ${failure.stage}: ${failure.message.split("\n")[0]}`;
}

function age(seconds: number): string {
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  return `${Math.round(seconds / 3600)}h`;
}

export function formatFleet(f: FleetStatus): string {
  const pin = f.pin
    ? `PINNED: ${f.pin.key} since ${f.pin.pinnedAt}${f.pin.reason ? ` (${f.pin.reason})` : ""}: agents run it until \`servicelb unpin\`\n`
    : "";
  const digest = `digests: ${f.digest.kind === "tree1" ? "every node verifies tree1: configs may be published by tree1" : `sha256 only: ${f.digest.reason}`}\n`;
  const fn = functionProblem(f);
  const passLine = `function: ${fn !== null ? `FAILING: ${fn}` : f.function ? `last pass ${f.function.at} succeeded` : "no pass recorded"}\n`;
  const head = `${f.newest ? `newest: ${f.newest.key} (revision ${f.newest.revision})\n` : "newest: no config published\n"}${pin}${passLine}${digest}`;
  const rows = [
    ["NODE", "REVISION", "STATE", "HAPROXY", "REPORTED", "CONFIG", "VERIFIES", "LAST ERROR"],
    ...f.nodes.map((n) => [
      n.node,
      n.revision ?? "-",
      n.behind ? "behind" : "current",
      n.haproxyRunning ? "running" : "down",
      `${age(n.ageSeconds)} ago${n.stale ? " (stale)" : ""}`,
      n.key === null
        ? "-"
        : `${n.key.slice(n.key.lastIndexOf("/") + 1)}${n.sha256 && digestKind(n.sha256) === "tree1" ? " (tree1)" : ""}`,
      n.digests.length > 0 ? n.digests.join(",") : "sha256",
      n.lastError ? `${n.lastError.stage}: ${n.lastError.message.split("\n")[0]}` : "-",
    ]),
  ];
  const table = formatTable(rows);
  const bad =
    f.unreadable.map((u) => `unreadable status report: ${u}\n`).join("") +
    f.skipped.map((k) => `skipped key (not trusted or does not verify): ${k.key}: ${k.reason}\n`).join("");
  return `${head}${table}\n${bad}`;
}

export async function runStatus(flags: Record<string, unknown>): Promise<number> {
  const store = openStore(requireStore(loadFunctionSettings(process.env, flags)));
  try {
    const [{ config: newest, skipped }, reports, pin, pass] = await Promise.all([
      store.newest(),
      store.listStatuses(),
      store.getPin(),
      store.getPassRecord().catch((err: unknown) => {
        if (!(err instanceof StoreError) || err.transient) throw err;
        return err;
      }),
    ]);
    const fleet = fleetStatus(newest, reports, Date.now(), {
      pin,
      skipped,
      ...(pass instanceof StoreError ? { passUnreadable: pass.message } : { pass }),
    });
    process.stdout.write(flags.format === "json" ? `${JSON.stringify(fleet, null, 2)}\n` : formatFleet(fleet));
    const problems = notConverged(fleet);
    for (const p of problems) process.stderr.write(`servicelb: not converged: ${p}\n`);
    return problems.length === 0 ? 0 : NOT_CONVERGED_EXIT;
  } finally {
    store.close();
  }
}
