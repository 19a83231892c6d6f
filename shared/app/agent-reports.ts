/*
 * What the reconcile function learns from the agents' reports in the store (status/<node>.json),
 * read beside a pass at most once a minute:
 *
 * - Which kind of digest it publishes configs by (core/publish/config-digest.ts), and whether in chunks
 *   (core/publish/chunk-manifest.ts). A tree1 config is skipped, as not verifying, by an agent that knows
 *   only sha256, and a chunked config's object reads as a body that does not verify to an agent
 *   that does not read chunks1: such an agent would serve its last config for as long as they are
 *   published. So in `auto` (the default) a publisher switches to tree1, and to chunks, only when
 *   every agent's report says it can, and back as soon as what it reads says one cannot.
 * - How many file descriptors the smallest node has for a config's listeners and server slots
 *   (core/model/descriptors.ts), which placement keeps configs within (core/model/backend-layout.ts), whatever
 *   the digest setting. Limits seldom change: when the reports cannot be read, the last room read
 *   stands, lowered by any smaller one a partial read shows.
 *
 * The rule (fleetVerdict), for each capability, on one read:
 * - **No** — back to sha256, or to whole configs — when a report that was read does not list the
 *   capability or is not a report at all; when the notifier knows more agents than there are
 *   records (a known agent that has never reported: a new one, or one that cannot write to the
 *   store); or when a whole read finds no report. A node's report left behind after the node went
 *   counts as its agent until deleted (deleting it, or upgrading the node, is how an operator says
 *   it is gone). Safety first: what is known about an agent is never overridden.
 * - **Not known** — the last decision stands — when the read failed (the listing), or records
 *   listed could not be read (the store's errors, timeouts, 503s twice in a row), and nothing
 *   read says no. A fleet of a thousand nodes read under 1 % of 503s comes up short now and
 *   then: each such read switching every agent back to whole configs would cost each of them
 *   the whole config (BENCHMARKS.md, "A fleet with configs in chunks"). A decision is not kept
 *   on reads that fail for longer than DOUBT_LIMIT_MS, nor when a due read does not come back in
 *   time for a pass (which then publishes by the last decision, and the read decides the next).
 * - **Yes** otherwise: every listed record read, each a report that lists the capability, and at
 *   least as many as the agents known.
 */
import type { Logger } from "../adapters/log.js";
import type { StatusRead } from "../adapters/store.js";
import { type NodeStatus, nodeStatusSchema } from "../agent/status-report.js";
import type { DigestKind } from "../core/publish/config-digest.js";
import type { HeldCertificates } from "../core/gateway/certificates.js";
import { fleetCertificates, UNREAD } from "./fleet-certificates.js";
import { errorMessage } from "../core/error-message.js";
import { settlesWithin } from "../core/deadline.js";

export type DigestSetting = "auto" | DigestKind;

/** Reads of the agents' reports a warm instance makes at most once per this. */
export const DIGEST_RECHECK_MS = 60_000;
/** How long a pass waits for a due read (see forPass) before it publishes by sha256 (a slow store). */
export const FIRST_READ_WAIT_MS = 1000;

/** One read of the reports, as fleetVerdict takes it: the listing's count is unknown when the listing failed. */
export interface FleetRead {
  /** Records listed and not found gone; undefined when the records could not be listed. */
  records: number | undefined;
  /** The reports read (parsed JSON, or what could not be parsed). */
  reports: readonly unknown[];
  /** Records listed that could not be read (the store's errors). */
  unread: number;
}

/** What one read says of a capability: yes, no (with why), or not known (with why): see the module doc. */
export type FleetVerdict =
  | { allowed: true }
  | { allowed: false; reason: string }
  | { allowed: undefined; reason: string };

/** A read of every record, none failing: what `servicelb status` and a whole read judge. */
export function wholeRead(reports: readonly unknown[]): FleetRead {
  return { records: reports.length, reports, unread: 0 };
}

/** The FleetRead of a StatusRead. */
export function fleetRead(read: StatusRead): FleetRead {
  return { records: read.reports.length + read.unread.length, reports: read.reports, unread: read.unread.length };
}

/**
 * The verdict of one read on a capability that each report may list (`has`), `what` naming it in
 * the reason. `agents`: how many agents the notifier finds, when known; `lastRecords`: the records
 * of the last read that listed them, for a read that could not list.
 */
export function fleetVerdict(
  read: FleetRead,
  agents: number | undefined,
  has: (status: NodeStatus) => boolean,
  what: string,
  lastRecords?: number,
): FleetVerdict {
  for (const report of read.reports) {
    const parsed = nodeStatusSchema.safeParse(report);
    if (!parsed.success) return { allowed: false, reason: "an agent's report cannot be read" };
    if (!has(parsed.data))
      return {
        allowed: false,
        reason: `node ${parsed.data.node} (${parsed.data.agent}) does not report that it ${what}`,
      };
  }
  const records = read.records ?? lastRecords;
  if (agents !== undefined && records !== undefined && records < agents)
    return { allowed: false, reason: `${agents} agents are known, ${records} have reported to the store` };
  if (read.records === undefined) return { allowed: undefined, reason: "the agents' reports cannot be listed" };
  if (read.unread > 0)
    return {
      allowed: undefined,
      reason: `${read.unread} of ${read.records} agents' reports cannot be read`,
    };
  if (read.reports.length === 0) return { allowed: false, reason: "no agent has reported to the store" };
  return { allowed: true };
}

const verifiesTree1 = (s: NodeStatus) => s.digests.includes("tree1");
const readsChunks = (s: NodeStatus) => s.formats.includes("chunks1");

/**
 * The kind a whole read of the agents' reports allows, and, for sha256, why. `agents`: how many
 * agents the notifier finds (the agent Service's endpoints and the static list), when known; an
 * agent that never reports (one that cannot write to the store) shows only there.
 */
export function digestForFleet(reports: readonly unknown[], agents?: number): { kind: DigestKind; reason?: string } {
  const verdict = fleetVerdict(wholeRead(reports), agents, verifiesTree1, "verifies tree1");
  return verdict.allowed ? { kind: "tree1" } : { kind: "sha256", reason: verdict.reason };
}

/** Whether a whole read allows configs in chunks (core/publish/chunk-manifest.ts). */
export function chunksForFleet(reports: readonly unknown[], agents?: number): boolean {
  return fleetVerdict(wholeRead(reports), agents, readsChunks, "reads chunks1").allowed === true;
}

/**
 * The room of the smallest node that reports one: its limit less what HAProxy takes itself. Null
 * when no report says (agents from before, or that cannot tell their limit).
 */
export function roomForFleet(reports: readonly unknown[]): number | null {
  let room: number | null = null;
  for (const report of reports) {
    const parsed = nodeStatusSchema.safeParse(report);
    const files = parsed.success ? parsed.data.openFiles : null;
    if (files) room = Math.min(room ?? Number.POSITIVE_INFINITY, files.limit - files.reserved);
  }
  return room;
}

/** How long an instance's first pass waits for the first read for the certificates the nodes hold. */
export const CERTIFICATES_WAIT_MS = 5000;

/** How long a decision stands on reads that keep failing: then whole configs by sha256 until one succeeds. */
export const DOUBT_LIMIT_MS = 10 * 60_000;

export class AgentReports {
  private decided: DigestKind | undefined;
  private nodeRoom: number | null = null;
  private chunksRead = false;
  private checkedAt = Number.NEGATIVE_INFINITY;
  /** How many records the last read that listed them found. */
  private lastRecords: number | undefined;
  /** When a read last read every record listed. */
  private wholeAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;
  private held: HeldCertificates = UNREAD;

  constructor(
    private readonly setting: DigestSetting,
    /** One read of status/; throws when the records cannot be listed. */
    private readonly readReports: () => Promise<StatusRead>,
    /** How many agents there are, or undefined when that cannot be told (discovery failed). */
    private readonly countAgents: () => Promise<number | undefined>,
    private readonly log: Logger,
    private readonly recheckMs = DIGEST_RECHECK_MS,
    private readonly now: () => number = Date.now,
    private readonly firstWaitMs = FIRST_READ_WAIT_MS,
    private readonly doubtLimitMs = DOUBT_LIMIT_MS,
    private readonly certificatesWaitMs = CERTIFICATES_WAIT_MS,
  ) {}

  /** The room of the smallest node, by the last read (roomForFleet). */
  get room(): number | null {
    return this.nodeRoom;
  }

  /** The Gateway certificates every node holds, by the reads so far (fleet-certificates.ts). */
  get certificates(): HeldCertificates {
    return this.held;
  }

  /**
   * The certificates, once the first read of an instance has come back (for at most
   * CERTIFICATES_WAIT_MS) when `wait` (the cluster has an HTTPS listener): a cold pass that
   * rendered before it would unbind every HTTPS listener. A cluster without one never waits. Call
   * after forPass, which starts that read.
   */
  async certificatesForPass(wait: boolean): Promise<HeldCertificates> {
    if (wait && this.held === UNREAD && this.reading !== undefined)
      await settlesWithin(this.reading, this.certificatesWaitMs);
    return this.held;
  }

  /** Configs may be published in chunks: every agent reads them, by the last read that decided. */
  get chunked(): boolean {
    return this.chunksRead;
  }

  /** The kind decided so far. */
  get current(): DigestKind {
    return this.setting === "auto" ? (this.decided ?? "sha256") : this.setting;
  }

  /**
   * The kind a pass publishes by. A read of the reports starts when one is due (beside the pass's
   * list); in `auto` the pass waits for it, for at most FIRST_READ_WAIT_MS, unless the last
   * decision was sha256, which is never the wrong one: an instance's first pass, and every due one
   * on tree1, so that an agent that joined without tree1 is served by the next pass. A read that
   * does not come back in time leaves the last decision to this pass (sha256 before any), and
   * decides the next. The room is never waited for: the one read last stands meanwhile.
   */
  async forPass(): Promise<DigestKind> {
    // Never read synchronously: `reading` is set before the read can settle.
    if (this.reading === undefined && this.now() - this.checkedAt >= this.recheckMs)
      this.reading = Promise.resolve().then(() => this.read());
    if (this.setting !== "auto") return this.setting;
    if (this.decided !== "sha256" && this.reading !== undefined) await settlesWithin(this.reading, this.firstWaitMs);
    return this.current;
  }

  private async read(): Promise<void> {
    const auto = this.setting === "auto";
    const counting = auto ? this.countAgents().catch(() => undefined) : Promise.resolve(undefined);
    let read: FleetRead;
    try {
      const statuses = await this.readReports();
      read = fleetRead(statuses);
      if (statuses.unread.length > 0)
        this.log.warn(
          { unread: statuses.unread.length, records: read.records, first: statuses.unread[0]!.error.message },
          "some agents' reports cannot be read: the last decision on digests and chunks stands unless a report read says otherwise",
        );
    } catch (err) {
      read = { records: undefined, reports: [], unread: 0 };
      const error = errorMessage(err);
      this.log.warn(
        { err: error, room: this.nodeRoom, digest: this.current, chunked: this.chunksRead },
        "cannot read the agents' reports: the last decision on digests and chunks, and the last room, stand",
      );
    }
    try {
      this.decide(read, await counting);
    } finally {
      this.checkedAt = this.now();
      this.reading = undefined;
    }
  }

  /** Applies one read's verdicts (fleetVerdict); a read that decides nothing keeps the last, for a while. */
  private decide(read: FleetRead, agents: number | undefined): void {
    const whole = read.records !== undefined && read.unread === 0;
    if (whole) this.wholeAt = this.now();
    const room = roomForFleet(read.reports);
    const nodeRoom = whole ? room : room === null ? this.nodeRoom : Math.min(room, this.nodeRoom ?? room);
    if (nodeRoom !== this.nodeRoom)
      this.log.info(
        { room: nodeRoom },
        nodeRoom === null
          ? "no agent reports its file descriptor limit: configs are not kept within one"
          : `the smallest node has room for ${nodeRoom} file descriptors for a config's listeners and server slots`,
      );
    this.nodeRoom = nodeRoom;
    if (read.records !== undefined) this.held = fleetCertificates(this.held, read.reports, whole);
    if (this.setting !== "auto") return;
    const lastRecords = this.lastRecords;
    if (read.records !== undefined) this.lastRecords = read.records;
    const chunks = fleetVerdict(read, agents, readsChunks, "reads chunks1", lastRecords);
    const digest = fleetVerdict(read, agents, verifiesTree1, "verifies tree1", lastRecords);
    // Doubt kept too long is a no: whole configs by sha256, which every agent reads.
    const expired = this.now() - this.wholeAt > this.doubtLimitMs;
    const verdict = (v: FleetVerdict): FleetVerdict =>
      v.allowed === undefined && expired
        ? {
            allowed: false,
            reason: `the agents' reports have not been read whole for ${this.doubtLimitMs / 1000} s: ${v.reason}`,
          }
        : v;
    const c = verdict(chunks);
    if (c.allowed !== undefined) {
      if (c.allowed !== this.chunksRead)
        this.log.info(
          { chunked: c.allowed, ...(c.allowed ? {} : { reason: c.reason }) },
          c.allowed
            ? "every agent reads chunked configs: tree1 configs are published in chunks"
            : "configs are published whole",
        );
      this.chunksRead = c.allowed;
    }
    const d = verdict(digest);
    if (d.allowed !== undefined) {
      const kind: DigestKind = d.allowed ? "tree1" : "sha256";
      if (kind !== this.decided)
        this.log.info(
          { digest: kind, ...(d.allowed ? {} : { reason: d.reason }) },
          kind === "tree1"
            ? "every agent verifies tree1 digests: configs are published by tree1"
            : "configs are published by sha256 digests",
        );
      this.decided = kind;
    }
  }
}
