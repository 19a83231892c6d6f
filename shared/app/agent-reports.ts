/*
 * What the reconcile function learns from the agents' reports in the store (status/<node>.json),
 * read beside a pass at most once a minute:
 *
 * - Which kind of digest it publishes configs by (core/config-digest.ts). A tree1 config is
 *   skipped, as not verifying, by an agent that knows only sha256, which would then serve its last
 *   config for as long as tree1 configs are published: so in `auto` (the default) a publisher
 *   switches to tree1 only when every agent's report says it verifies tree1, and back to sha256 as
 *   soon as one report does not. Whatever leaves it in doubt counts as such a report: one that
 *   cannot be read, reports that cannot be read at all (the store fails), fewer reports than agents
 *   the notifier finds, and a node's report left behind after the node went (deleting it, or
 *   setting `tree1`, is how an operator says it is gone).
 * - How many file descriptors the smallest node has for a config's listeners and server slots
 *   (core/descriptors.ts), which placement keeps configs within (core/backend-layout.ts), whatever
 *   the digest setting. Limits seldom change: when the reports cannot be read, the last room read
 *   stands.
 */
import type { Logger } from "../adapters/log.js";
import { nodeStatusSchema } from "../agent/node-status.js";
import type { DigestKind } from "../core/config-digest.js";
import { errorMessage } from "../core/error-message.js";

export type DigestSetting = "auto" | DigestKind;

/** Reads of the agents' reports a warm instance makes at most once per this. */
export const DIGEST_RECHECK_MS = 60_000;
/** How long a pass waits for a due read (see forPass) before it publishes by sha256 (a slow store). */
export const FIRST_READ_WAIT_MS = 1000;

/**
 * The kind the agents' reports allow, and, for sha256, why. `agents`: how many agents the
 * notifier finds (the agent Service's endpoints and the static list), when known; an agent that
 * never reports (one that cannot write to the store) shows only there.
 */
export function digestForFleet(reports: readonly unknown[], agents = 0): { kind: DigestKind; reason?: string } {
  if (reports.length === 0) return { kind: "sha256", reason: "no agent has reported to the store" };
  if (reports.length < agents)
    return { kind: "sha256", reason: `${agents} agents are known, ${reports.length} have reported to the store` };
  for (const report of reports) {
    const parsed = nodeStatusSchema.safeParse(report);
    if (!parsed.success) return { kind: "sha256", reason: "an agent's report cannot be read" };
    if (!parsed.data.digests.includes("tree1"))
      return {
        kind: "sha256",
        reason: `node ${parsed.data.node} (${parsed.data.agent}) does not report that it verifies tree1`,
      };
  }
  return { kind: "tree1" };
}

/**
 * Whether configs may be published in chunks (core/chunk-manifest.ts): only when every agent's
 * report says it reads them, and there are as many reports as agents known. An agent from before
 * reads a chunked config's object as a body that does not verify, and would serve its last config.
 */
export function chunksForFleet(reports: readonly unknown[], agents = 0): boolean {
  if (reports.length === 0 || reports.length < agents) return false;
  return reports.every((report) => {
    const parsed = nodeStatusSchema.safeParse(report);
    return parsed.success && parsed.data.formats.includes("chunks1");
  });
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

export class AgentReports {
  private decided: DigestKind | undefined;
  private nodeRoom: number | null = null;
  private chunksRead = false;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly setting: DigestSetting,
    private readonly readReports: () => Promise<unknown[]>,
    /** How many agents there are, or undefined when that cannot be told (discovery failed). */
    private readonly countAgents: () => Promise<number | undefined>,
    private readonly log: Logger,
    private readonly recheckMs = DIGEST_RECHECK_MS,
    private readonly now: () => number = Date.now,
    private readonly firstWaitMs = FIRST_READ_WAIT_MS,
  ) {}

  /** The room of the smallest node, by the last read (roomForFleet). */
  get room(): number | null {
    return this.nodeRoom;
  }

  /** Configs may be published in chunks: every agent reads them, by the last read (chunksForFleet). */
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
   * on tree1, so that an agent that joined without tree1 is served by the next pass. The room is
   * never waited for: the one read last stands meanwhile.
   */
  async forPass(): Promise<DigestKind> {
    // Never read synchronously: `reading` is set before the read can settle.
    if (this.reading === undefined && this.now() - this.checkedAt >= this.recheckMs)
      this.reading = Promise.resolve().then(() => this.read());
    if (this.setting !== "auto") return this.setting;
    if (this.decided !== "sha256" && this.reading !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      const read = await Promise.race([
        this.reading.then(() => true),
        new Promise<false>((r) => (timer = setTimeout(() => r(false), this.firstWaitMs))),
      ]);
      clearTimeout(timer);
      // A due read that did not come back in time leaves tree1 in doubt.
      if (!read) return "sha256";
    }
    return this.current;
  }

  private async read(): Promise<void> {
    const auto = this.setting === "auto";
    try {
      const [reports, agents] = await Promise.all([
        this.readReports(),
        auto ? this.countAgents().catch(() => undefined) : undefined,
      ]);
      const chunked = chunksForFleet(reports, agents);
      if (chunked !== this.chunksRead)
        this.log.info(
          { chunked },
          chunked
            ? "every agent reads chunked configs: tree1 configs are published in chunks"
            : "configs are published whole",
        );
      this.chunksRead = chunked;
      const room = roomForFleet(reports);
      if (room !== this.nodeRoom)
        this.log.info(
          { room },
          room === null
            ? "no agent reports its file descriptor limit: configs are not kept within one"
            : `the smallest node has room for ${room} file descriptors for a config's listeners and server slots`,
        );
      this.nodeRoom = room;
      if (!auto) return;
      const { kind, reason } = digestForFleet(reports, agents);
      if (kind !== this.decided)
        this.log.info(
          { digest: kind, ...(reason ? { reason } : {}) },
          kind === "tree1"
            ? "every agent verifies tree1 digests: configs are published by tree1"
            : "configs are published by sha256 digests",
        );
      this.decided = kind;
    } catch (err) {
      // In doubt, whole: every agent reads those.
      this.chunksRead = false;
      const error = errorMessage(err);
      if (!auto) {
        this.log.warn(
          { err: error, room: this.nodeRoom },
          "cannot read the agents' reports: the last room read stands",
        );
        return;
      }
      this.log.warn(
        { err: error, digest: "sha256", room: this.nodeRoom },
        "cannot read the agents' reports to choose the config digest: configs are published by sha256",
      );
      this.decided = "sha256";
    } finally {
      this.checkedAt = this.now();
      this.reading = undefined;
    }
  }
}
