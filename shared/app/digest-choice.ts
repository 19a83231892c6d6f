/*
 * Which kind of digest the reconcile function publishes configs by (core/config-digest.ts). A
 * tree1 config is skipped, as not verifying, by an agent that knows only sha256, which would then
 * serve its last config for as long as tree1 configs are published: so in `auto` (the default) a
 * publisher switches to tree1 only when every agent's report in the store (status/<node>.json)
 * says it verifies tree1, and back to sha256 as soon as one report does not. Whatever leaves it in
 * doubt counts as such a report: one that cannot be read, reports that cannot be read at all
 * (the store fails), fewer reports than agents the notifier finds, and a node's report left
 * behind after the node went (deleting it, or setting `tree1`, is how an operator says it is gone).
 */
import type { Logger } from "../adapters/log.js";
import { nodeStatusSchema } from "../agent/node-status.js";
import type { DigestKind } from "../core/config-digest.js";

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

export class DigestChoice {
  private decided: DigestKind | undefined;
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

  /** The kind decided so far. */
  get current(): DigestKind {
    return this.setting === "auto" ? (this.decided ?? "sha256") : this.setting;
  }

  /**
   * The kind a pass publishes by. A read of the reports starts when one is due (beside the pass's
   * list); the pass waits for it, for at most FIRST_READ_WAIT_MS, unless the last decision was
   * sha256, which is never the wrong one: an instance's first pass, and every due one on tree1,
   * so that an agent that joined without tree1 is served by the next pass.
   */
  async forPass(): Promise<DigestKind> {
    if (this.setting !== "auto") return this.setting;
    // Never read synchronously: `reading` is set before the read can settle.
    if (this.reading === undefined && this.now() - this.checkedAt >= this.recheckMs)
      this.reading = Promise.resolve().then(() => this.read());
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
    try {
      const [reports, agents] = await Promise.all([this.readReports(), this.countAgents().catch(() => undefined)]);
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
      this.log.warn(
        { err: err instanceof Error ? err.message : String(err), digest: "sha256" },
        "cannot read the agents' reports to choose the config digest: configs are published by sha256",
      );
      this.decided = "sha256";
    } finally {
      this.checkedAt = this.now();
      this.reading = undefined;
    }
  }
}
