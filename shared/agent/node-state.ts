/*
 * What the agent knows about its node — the config HAProxy runs, the one on disk, whether the
 * slots are known — and the record of outcomes (status, metrics, the state file). The pull loop
 * (pull-loop.ts) and the apply steps (apply-steps.ts) change it only through its transitions; each
 * says what happened, and the state that follows is decided here.
 *
 * The state file keeps what the agent has applied and what last went wrong, so that a restarted
 * agent knows which published config its haproxy.cfg is. It is written after the config file, so
 * a crash in between leaves a config whose digest does not match: the agent then treats it as
 * unknown and lets the newest published config decide (see pull-loop.ts).
 */

import { z } from "zod";
import type { Logger } from "../adapters/log.js";
import type { SkippedKey, StoredConfig } from "../adapters/store.js";
import { type Backoff, backoffDelay } from "../core/backoff.js";
import { configDigest, digestKind, digestSchema } from "../core/publish/config-digest.js";
import { compareConfigKeys } from "../core/publish/config-key.js";
import { readIfExists, writeFileAtomic } from "./files.js";
import type { AgentMetrics } from "./metrics.js";

export const appliedSchema = z.object({
  /** The store key; null for a config on disk whose key the agent does not know. */
  key: z.string().nullable(),
  /** The config's digest (core/publish/config-digest.ts): sha256 hex, or tree1:<hex>. */
  sha256: digestSchema,
  revision: z.string().nullable(),
  appliedAt: z.string(),
  /** How it went live: at HAProxy start, by a reload, through the runtime API, or it already was. */
  how: z.enum(["start", "reload", "runtime", "unchanged"]),
});

export const agentErrorSchema = z.object({
  /** pull: the store; verify: digest or metadata; check: haproxy -c; apply: runtime API, reload or start. */
  stage: z.enum(["pull", "verify", "check", "apply"]),
  key: z.string().nullable(),
  message: z.string(),
  at: z.string(),
});

const stateSchema = z.object({ applied: appliedSchema.nullable(), lastError: agentErrorSchema.nullable() });

export type AppliedConfig = z.infer<typeof appliedSchema>;
export type AgentError = z.infer<typeof agentErrorSchema>;
export type AgentState = z.infer<typeof stateSchema>;

export const EMPTY_STATE: AgentState = { applied: null, lastError: null };

/** The saved state; a missing or unreadable file means "nothing known" (never fatal: the store has the truth). */
export async function loadState(file: string, log: Logger): Promise<AgentState> {
  const text = await readIfExists(file);
  if (text === null) return EMPTY_STATE;
  try {
    return stateSchema.parse(JSON.parse(text));
  } catch (err) {
    log.warn({ file, err: errorMessage(err) }, "ignoring an unreadable agent state file");
    return EMPTY_STATE;
  }
}

export async function saveState(file: string, state: AgentState): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(state, null, 2)}\n`);
}
import { errorMessage } from "../core/error-message.js";

/** A config the node knows by its text: what HAProxy runs, or what haproxy.cfg holds. */
export interface KnownConfig {
  text: string;
  sha256: string;
  /** null: a config on disk the agent cannot name (see the state file above). */
  key: string | null;
  revision: string | null;
}

interface Failure {
  key: string;
  attempts: number;
  retryAt: number;
}

export interface PullLoopStatus {
  /** The config HAProxy runs; null until HAProxy serves one. */
  applied: AppliedConfig | null;
  lastError: AgentError | null;
  /** A config that failed and waits for its retry (or for a newer one). */
  backoff: { key: string; attempts: number; retryAt: string } | null;
  /** The pin this agent honours (`servicelb pin`); null when it follows the newest config. */
  pinned: { key: string; pinnedAt: string } | null;
  /** Newer keys whose objects did not verify: skipped. */
  skipped: SkippedKey[];
}

export interface NodeStateOptions {
  configPath: string;
  stateFile: string;
  /** Wait before retrying a failed config: initialMs, doubling up to maxMs. */
  backoff: Backoff;
  metrics: AgentMetrics;
  log: Logger;
  /** haproxy.cfg as found on disk at start (null: none), and the state saved beside it. */
  disk: string | null;
  saved: AgentState;
  /** Called after every applied config and every failure (e.g. to report status). */
  onChange?: () => void;
}

export class NodeState {
  private running: KnownConfig | null = null;
  private file: KnownConfig | null = null;
  private haproxyStarted = false;
  private slotsUnknown = false;
  private failure: Failure | null = null;
  private state: AgentState;

  constructor(private readonly options: NodeStateOptions) {
    let applied: AppliedConfig | null = null;
    if (options.disk !== null) {
      // In the recorded config's kind, so that the file is recognised as the config last applied.
      const sha = configDigest(digestKind(options.saved.applied?.sha256 ?? ""), options.disk);
      const known = options.saved.applied?.sha256 === sha ? options.saved.applied : null;
      this.running = this.file = {
        text: options.disk,
        sha256: sha,
        key: known?.key ?? null,
        revision: known?.revision ?? null,
      };
      applied = known;
      if (!known)
        options.log.warn(
          { configPath: options.configPath, sha256: sha },
          "the config on disk is not the one last recorded (stopped between write and record?): the newest published config decides",
        );
    }
    // Nothing runs yet: "applied" becomes true once HAProxy serves (see status()).
    this.state = { applied, lastError: options.saved.lastError };
  }

  /** What HAProxy runs (runtime API changes included); null until a config is known. */
  get current(): KnownConfig | null {
    return this.running;
  }

  /** What haproxy.cfg holds: always a config that passed `haproxy -c` (or the file found at start). */
  get onDisk(): KnownConfig | null {
    return this.file;
  }

  /** HAProxy was started (by the agent) and runs `current`. */
  get started(): boolean {
    return this.haproxyStarted;
  }

  /**
   * What the slots run is not known (undoing runtime changes failed and no reload has restored
   * the file's config yet): the next change goes through a reload, never a runtime diff.
   */
  get liveUnknown(): boolean {
    return this.slotsUnknown;
  }

  /** HAProxy was started on the file and serves it. */
  haproxyServes(): void {
    this.haproxyStarted = true;
  }

  /** HAProxy runs `config` through the runtime API, ahead of the file (which is written next). */
  ranThroughRuntime(config: KnownConfig): void {
    this.running = config;
  }

  /** The runtime changes to `config` were put back: HAProxy runs it again. */
  undidRuntime(config: KnownConfig): void {
    this.running = config;
  }

  /** A runtime change or its undo failed half-way: which addresses the slots hold is not known. */
  lostTrackOfSlots(): void {
    this.slotsUnknown = true;
  }

  /**
   * HAProxy was reloaded onto the file to put its slots back: it runs the file's config. True when
   * runtime changes newer than the file were dropped with it (they must be pulled again).
   */
  reloadedFromDisk(): boolean {
    const dropped = this.running !== this.file;
    this.running = this.file;
    this.slotsUnknown = false;
    return dropped;
  }

  /**
   * HAProxy was restarted by its supervisor on the file, read as `fileText` (null: unknown): it
   * runs that, without the runtime changes made to the one that died. What failed while it was
   * down (a reload with no master) must not wait out a backoff. Returns the key of the config
   * whose runtime changes were dropped, if any.
   */
  restartedOn(fileText: string | null): string | null {
    const dropped = this.running !== this.file ? (this.running?.key ?? null) : null;
    this.slotsUnknown = false;
    const disk = this.file;
    // In the recorded config's kind: the same bytes are recognised whichever kind named them.
    const sha = fileText === null ? null : configDigest(digestKind(disk?.sha256 ?? ""), fileText);
    // A file the agent did not record (it wrote it just before or after the restart read it): its key is unknown.
    this.running =
      fileText === null || sha === disk?.sha256 ? disk : { text: fileText, sha256: sha!, key: null, revision: null };
    this.failure = null;
    return dropped;
  }

  /** What the node knows; the pull loop adds what it knows of the store (pin, skipped keys). */
  status(): Omit<PullLoopStatus, "pinned" | "skipped"> {
    const f = this.failure;
    return {
      applied: this.started ? this.state.applied : null,
      lastError: this.state.lastError,
      backoff:
        f && Date.now() < f.retryAt
          ? { key: f.key, attempts: f.attempts, retryAt: new Date(f.retryAt).toISOString() }
          : null,
    };
  }

  get lastError(): AgentError | null {
    return this.state.lastError;
  }

  get failed(): boolean {
    return this.failure !== null;
  }

  /**
   * Only a key after this one may be taken: the running config's, or the failed one's while it
   * backs off when that is newer (docs/design.md#invariant-1-the-latest-decision-wins: a config
   * running through the runtime API moves `current` past a failure without clearing it, so the
   * failure alone is not enough).
   */
  afterKey(): string | null {
    const running = this.current?.key ?? null;
    const f = this.failure;
    const failed = f !== null && Date.now() < f.retryAt ? f.key : null;
    if (running === null) return failed;
    return failed !== null && compareConfigKeys(failed, running) > 0 ? failed : running;
  }

  /** `config` went live and is what the file holds: the slots are the file's. */
  async succeed(
    config: Omit<StoredConfig, "key" | "revision"> & { key: string | null; revision: string | null },
    how: AppliedConfig["how"],
    t0: number,
    lastError: AgentError | null = null,
  ): Promise<void> {
    const { metrics, log } = this.options;
    this.slotsUnknown = false;
    this.running = this.file = {
      text: config.config,
      sha256: config.sha256,
      key: config.key,
      revision: config.revision,
    };
    this.failure = null;
    const applied: AppliedConfig = {
      key: config.key,
      sha256: config.sha256,
      revision: config.revision,
      appliedAt: new Date().toISOString(),
      how,
    };
    const ms = performance.now() - t0;
    metrics.appliedRevision.set(config.revision === null ? 0 : Number(config.revision));
    metrics.appliedTimestamp.set(Date.now() / 1000);
    metrics.applySeconds.observe({ how }, ms / 1000);
    if (how === "runtime") metrics.runtimeUpdates.inc();
    log.info({ key: config.key, revision: config.revision, how, ms: Math.round(ms) }, "config applied");
    await this.record({ applied, lastError });
  }

  /**
   * A failed step; a failed config (not a failed pull) waits out a backoff before it is tried
   * again. A config that does not verify is skipped instead (pull-target.ts): a backoff would hold
   * every older key, and a forged far-future key would freeze the node.
   */
  async fail(stage: AgentError["stage"], key: string | null, text: string): Promise<void> {
    const { backoff, metrics, log } = this.options;
    metrics.applyFailures.inc({ stage });
    let retryInMs: number | undefined;
    if (stage !== "pull" && stage !== "verify" && key !== null) {
      const attempts = this.failure?.key === key ? this.failure.attempts + 1 : 1;
      retryInMs = backoffDelay(backoff, attempts);
      this.failure = { key, attempts, retryAt: Date.now() + retryInMs };
    }
    log.error({ stage, key, retryInMs }, `config not applied (${stage}): ${text}; the previous config keeps serving`);
    await this.recordError({ stage, key, message: text, at: new Date().toISOString() });
  }

  /** The last error, without a failure of its own (e.g. a check that could not run), or null to clear it. */
  async recordError(lastError: AgentError | null): Promise<void> {
    await this.record({ ...this.state, lastError });
  }

  private async record(state: AgentState): Promise<void> {
    this.state = state;
    try {
      await saveState(this.options.stateFile, state);
    } catch (err) {
      this.options.log.error({ err: errorMessage(err), file: this.options.stateFile }, "cannot save the agent state");
    }
    this.options.onChange?.();
  }
}
