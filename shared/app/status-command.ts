/*
 * `servicelb status [--nodes] [--format text|json]`: fleet convergence at a glance. First a
 * summary — how many nodes are current, behind, down, pinned, and the oldest config still served
 * and since when — so that a fleet of a thousand nodes reads in a few lines; with --nodes (and
 * always in JSON), every node that reported to the store (status/<node>.json): the config it runs,
 * whether that is the newest published one, its last error and how old its report is. A report older than three of the
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
import { compareConfigKeys } from "../core/publish/config-key.js";
import { nodeStatusSchema } from "../agent/status-report.js";
import { loadFunctionSettings, requireStore } from "./function-options.js";
import { formatTable } from "./text-table.js";
import { digestForFleet } from "./agent-reports.js";
import { type DigestKind, digestKind } from "../core/publish/config-digest.js";
import { admittedNodes, type RolloutRecord, rolloutTarget } from "../core/rollout/rollout-record.js";

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
  /** The pin the agent holds, if any. */
  pinned: string | null;
  /** With a canary rollout: the node's wave (1-based) and whether that wave runs the candidate. */
  wave?: { wave: number; candidate: boolean };
  /** The Gateway certificates the node holds (refs, never contents); null without --gateway-cert-dir. */
  gatewayCertificates: string[] | null;
}

/** The fleet in counts; each node is exactly one of current, behind and down. */
export interface FleetSummary {
  nodes: number;
  /** Serves the newest config (the pinned one while pinned). */
  current: number;
  /** Serves an older config, a skipped one, or none. */
  behind: number;
  /** HAProxy not running, or a stale report (agent gone or cut off from the store): what it serves is not known. */
  down: number;
  /** Of those down: HAProxy not running by a fresh report. */
  haproxyDown: number;
  /** Of those down: reports older than three report intervals. */
  stale: number;
  /** Nodes whose agent holds a pin (`servicelb pin`). */
  pinned: number;
  /**
   * Records listed whose report the store would not give (every retry failed) or that are no
   * report: what those nodes serve is not known, so the fleet does not count as converged.
   */
  unknown: number;
  /**
   * The oldest config a node that is not down serves, how many serve it, and since when (the
   * earliest of their applies); null when none serves a known config.
   */
  oldestServed: { key: string; revision: string | null; nodes: number; since: string | null } | null;
  /**
   * The Gateway certificates the nodes hold: how many every node holds, and each one only some
   * hold, which no HTTPS listener is bound with until every node holds it
   * (docs/gateway-api.md#certificates); null when no node has a --gateway-cert-dir.
   */
  gatewayCertificates: { everywhere: number; partial: Array<{ ref: string; nodes: number }> } | null;
}

export interface FleetStatus {
  summary: FleetSummary;
  newest: { key: string; revision: string } | null;
  pin: Pin | null;
  /** Keys newer than the newest verified config that do not verify (reported by the store or an agent). */
  skipped: SkippedKey[];
  nodes: NodeRow[];
  /** Reports that are not agent status documents. */
  unreadable: string[];
  /** Records listed that could not be read, and the store's error. */
  unread: Array<{ node: string; error: string }>;
  /** The digest publishers in `auto` may use by these reports, and why not tree1. */
  digest: { kind: DigestKind; reason?: string };
  /** The reconcile function's last recorded pass; null before its first (or from a function before the record). */
  function: PassRecord | null;
  /** Why the function's record cannot be read, when it cannot. */
  functionUnreadable?: string;
  /** rollout.json, with canary rollouts on (docs/design.md#canary-rollouts). */
  rollout?: RolloutRecord;
}

export function fleetStatus(
  newest: ConfigHead | null,
  reports: readonly unknown[],
  now: number,
  store: {
    pin?: Pin | null;
    skipped?: SkippedKey[];
    pass?: PassRecord | null;
    passUnreadable?: string;
    rollout?: RolloutRecord | null;
    unread?: ReadonlyArray<{ node: string; error: string }>;
  } = {},
): FleetStatus {
  const pin = store.pin ?? null;
  const rollout = store.rollout ?? null;
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
      // A canary rollout names what each node runs, as a pin does for all of them.
      behind: pin
        ? key !== pin.key
        : rollout
          ? key !== rolloutTarget(rollout, s.node).key
          : newest !== null && (key === null || distrusted.has(key) || compareConfigKeys(key, newest.key) < 0),
      reportedAt: s.reportedAt,
      ageSeconds,
      stale: ageSeconds > 3 * s.reportIntervalSeconds,
      haproxyRunning: s.haproxy.running,
      lastError: s.lastError,
      digests: s.digests,
      pinned: s.pinned?.key ?? null,
      ...(rollout ? { wave: waveOf(rollout, s.node) } : {}),
      gatewayCertificates: s.gatewayCertificates,
    });
    for (const k of s.skipped) if (!skipped.has(k.key)) skipped.set(k.key, k);
  }
  nodes.sort((a, b) => compareStrings(a.node, b.node));
  const unread = [...(store.unread ?? [])].sort((a, b) => compareStrings(a.node, b.node));
  return {
    summary: summarize(nodes, unread.length + unreadable.length),
    newest: newest && { key: newest.key, revision: newest.revision },
    pin,
    skipped: [...skipped.values()],
    nodes,
    unreadable,
    unread,
    digest: digestForFleet(reports),
    function: store.pass ?? null,
    ...(store.passUnreadable !== undefined ? { functionUnreadable: store.passUnreadable } : {}),
    ...(rollout ? { rollout } : {}),
  };
}

/** A node's wave in the rollout (a node that joined after it started: the last). */
function waveOf(record: RolloutRecord, node: string): { wave: number; candidate: boolean } | undefined {
  const r = record.rollout;
  if (r === null) return undefined;
  const at = r.order.indexOf(node);
  const wave = at < 0 ? r.sizes.length : r.sizes.findIndex((size) => at < size) + 1;
  return { wave, candidate: admittedNodes(r).includes(node) };
}

/** The rollout in one line: its state, wave and the last gate's verdict. */
function formatRollout(record: RolloutRecord): string {
  const r = record.rollout;
  const file = (key: string) => key.slice(key.lastIndexOf("/") + 1);
  if (r === null)
    return `rollout: none: every node runs ${file(record.stable.key)}${record.blocked ? `; held back: ${file(record.blocked.key)}: ${record.blocked.reason}` : ""}\n`;
  const admitted = admittedNodes(r).length;
  const gate = r.gate ? `; gate ${r.gate.verdict}: ${r.gate.reason}` : "";
  const why = r.reason ? `: ${r.reason}` : "";
  return `rollout: ${r.state.toUpperCase()}${why}; wave ${r.wave + 1} of ${r.sizes.length}, ${admitted} of ${r.order.length} nodes on ${file(r.candidate.key)}${gate} (\`servicelb rollout status\`)\n`;
}

function summarize(nodes: readonly NodeRow[], unknown: number): FleetSummary {
  const down = (n: NodeRow) => n.stale || !n.haproxyRunning;
  let oldest: NodeRow[] = [];
  for (const n of nodes) {
    if (down(n) || n.key === null) continue;
    const order = oldest.length === 0 ? -1 : compareConfigKeys(n.key, oldest[0]!.key!);
    if (order < 0) oldest = [n];
    else if (order === 0) oldest.push(n);
  }
  const since = oldest
    .map((n) => n.appliedAt)
    .filter((at) => at !== null)
    .sort()[0];
  const counted = new Map<string, number>();
  for (const n of nodes) for (const ref of n.gatewayCertificates ?? []) counted.set(ref, (counted.get(ref) ?? 0) + 1);
  const partial = [...counted]
    .filter(([, held]) => held < nodes.length)
    .map(([ref, held]) => ({ ref, nodes: held }))
    .sort((a, b) => compareStrings(a.ref, b.ref));
  return {
    nodes: nodes.length + unknown,
    current: nodes.filter((n) => !down(n) && !n.behind).length,
    behind: nodes.filter((n) => !down(n) && n.behind).length,
    down: nodes.filter(down).length,
    haproxyDown: nodes.filter((n) => !n.stale && !n.haproxyRunning).length,
    stale: nodes.filter((n) => n.stale).length,
    pinned: nodes.filter((n) => n.pinned !== null).length,
    unknown,
    oldestServed:
      oldest.length === 0
        ? null
        : { key: oldest[0]!.key!, revision: oldest[0]!.revision, nodes: oldest.length, since: since ?? null },
    gatewayCertificates: nodes.some((n) => n.gatewayCertificates !== null)
      ? { everywhere: counted.size - partial.length, partial }
      : null,
  };
}

/** `status` exits with this when the fleet has not converged, so that scripts and CI can wait on it. */
export const NOT_CONVERGED_EXIT = 3;

/**
 * Why the fleet is not serving the newest config, one line per problem, or nothing when it is:
 * the function's last recorded pass failed; a node behind, with HAProxy down, whose report is
 * stale, cannot be read or is no report; or no node reporting at all.
 */
export function notConverged(f: FleetStatus): string[] {
  const fn = functionProblem(f);
  const problems = fn === null ? [] : [`function: ${fn}`];
  if (f.summary.nodes === 0) return [...problems, "no agent has reported to the store"];
  return problems.concat(
    f.unread.map((u) => `${u.node}: report cannot be read: ${u.error}`),
    f.unreadable.map((u) => `a status report that is not one: ${u}`),
    f.nodes.flatMap((n) => {
      const why = [
        n.behind && (n.wave ? "not on the config the rollout names for its wave" : "behind the newest config"),
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

/** The summary's two lines: the counts, and the oldest config still served. */
function formatSummary(s: FleetSummary): string {
  const down = s.down === 0 ? "0 down" : `${s.down} down (${s.haproxyDown} HAProxy down, ${s.stale} report stale)`;
  const unknown = s.unknown === 0 ? "" : `, ${s.unknown} unknown`;
  const counts = `nodes: ${s.nodes}: ${s.current} current, ${s.behind} behind, ${down}${unknown}; ${s.pinned} pinned\n`;
  const g = s.gatewayCertificates;
  const certificates = g
    ? `gateway certificates: ${g.everywhere} on every node${g.partial.map((p) => `; ${p.ref} on ${p.nodes} of ${s.nodes - s.unknown} nodes (not bound until every node holds it)`).join("")}\n`
    : "";
  const o = s.oldestServed;
  const oldest = o
    ? `oldest config served: ${o.key.slice(o.key.lastIndexOf("/") + 1)} (revision ${o.revision ?? "?"}) by ${o.nodes === 1 ? "1 node" : `${o.nodes} nodes`}${o.since ? `, since ${o.since}` : ""}\n`
    : "oldest config served: none known\n";
  return counts + oldest + certificates;
}

function formatNodes(nodes: readonly NodeRow[]): string {
  const rows = [
    ["NODE", "REVISION", "STATE", "HAPROXY", "REPORTED", "CONFIG", "VERIFIES", "LAST ERROR"],
    ...nodes.map((n) => [
      n.node,
      n.revision ?? "-",
      `${n.behind ? "behind" : "current"}${n.wave ? ` (wave ${n.wave.wave}${n.wave.candidate ? ", canary" : ""})` : ""}`,
      n.haproxyRunning ? "running" : "down",
      `${age(n.ageSeconds)} ago${n.stale ? " (stale)" : ""}`,
      n.key === null
        ? "-"
        : `${n.key.slice(n.key.lastIndexOf("/") + 1)}${n.sha256 && digestKind(n.sha256) === "tree1" ? " (tree1)" : ""}`,
      n.digests.length > 0 ? n.digests.join(",") : "sha256",
      n.lastError ? `${n.lastError.stage}: ${n.lastError.message.split("\n")[0]}` : "-",
    ]),
  ];
  return `${formatTable(rows)}\n`;
}

/** The summary; with `nodes`, a line per node after it. */
export function formatFleet(f: FleetStatus, { nodes = false }: { nodes?: boolean } = {}): string {
  const pin = f.pin
    ? `PINNED: ${f.pin.key} since ${f.pin.pinnedAt}${f.pin.reason ? ` (${f.pin.reason})` : ""}: agents run it until \`servicelb unpin\`\n`
    : "";
  const digest = `digests: ${f.digest.kind === "tree1" ? "every node verifies tree1: configs may be published by tree1" : `sha256 only: ${f.digest.reason}`}\n`;
  const fn = functionProblem(f);
  const passLine = `function: ${fn !== null ? `FAILING: ${fn}` : f.function ? `last pass ${f.function.at} succeeded` : "no pass recorded"}\n`;
  const head = `${f.newest ? `newest: ${f.newest.key} (revision ${f.newest.revision})\n` : "newest: no config published\n"}${pin}${passLine}${digest}`;
  const bad =
    f.unread.map((u) => `unread status report: ${u.node}: ${u.error}\n`).join("") +
    f.unreadable.map((u) => `unreadable status report: ${u}\n`).join("") +
    f.skipped.map((k) => `skipped key (not trusted or does not verify): ${k.key}: ${k.reason}\n`).join("");
  const rollout = f.rollout ? formatRollout(f.rollout) : "";
  return `${head}${rollout}${formatSummary(f.summary)}${nodes ? formatNodes(f.nodes) : ""}${bad}`;
}

/** Without --nodes, stderr names this many nodes that have not converged, and counts the rest. */
const NAMED_NODES = 10;

/** The function's problem and the nodes' (notConverged), at most NAMED_NODES of them named unless `all`. */
export function problemLines(f: FleetStatus, all: boolean): string[] {
  const problems = notConverged(f);
  const fn = problems.filter((p) => p.startsWith("function: "));
  const rest = problems.slice(fn.length);
  if (all || rest.length <= NAMED_NODES) return problems;
  const more = rest.length - NAMED_NODES;
  return [
    ...fn,
    ...rest.slice(0, NAMED_NODES),
    `and ${more} more ${more === 1 ? "node" : "nodes"} (\`servicelb status --nodes\` lists every node)`,
  ];
}

export async function runStatus(flags: Record<string, unknown>): Promise<number> {
  const store = openStore(requireStore(loadFunctionSettings(process.env, flags)));
  try {
    const [{ config: newest, skipped }, read, pin, pass, rollout] = await Promise.all([
      store.newest(),
      // One record the store keeps failing leaves that node unknown, not the command failed.
      store.readStatuses(),
      store.getPin(),
      store.getPassRecord().catch((err: unknown) => {
        if (!(err instanceof StoreError) || err.transient) throw err;
        return err;
      }),
      // A rollout.json that is not a record is `servicelb rollout status`'s to report.
      store.getRollout().catch(() => null),
    ]);
    const fleet = fleetStatus(newest, read.reports, Date.now(), {
      pin,
      skipped,
      rollout,
      unread: read.unread.map((u) => ({ node: nodeOfRecord(u.key), error: u.error.message })),
      ...(pass instanceof StoreError ? { passUnreadable: pass.message } : { pass }),
    });
    const nodes = flags.nodes === true;
    process.stdout.write(
      flags.format === "json" ? `${JSON.stringify(fleet, null, 2)}\n` : formatFleet(fleet, { nodes }),
    );
    const problems = problemLines(fleet, nodes);
    for (const p of problems) process.stderr.write(`servicelb: not converged: ${p}\n`);
    return problems.length === 0 ? 0 : NOT_CONVERGED_EXIT;
  } finally {
    store.close();
  }
}

/** `…/status/<node>.json` → `<node>`. */
function nodeOfRecord(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1).replace(/\.json$/, "");
}
