/*
 * What the agent knows about its node — the config HAProxy runs, the one on disk, whether the
 * slots are known — and the record of outcomes (status, metrics, the state file). Shared by the
 * pull loop (applier.ts) and the apply steps (activation.ts); only these two change it.
 */

import type { Logger } from "../adapters/log.js";
import type { SkippedKey, StoredConfig } from "../adapters/store.js";
import { type Backoff, backoffDelay } from "../core/backoff.js";
import { compareConfigKeys } from "../core/config-key.js";
import type { StageTrace } from "../adapters/stage-trace.js";
import { configDigest, digestKind } from "../core/config-digest.js";
import type { AgentMetrics } from "./metrics.js";
import { saveState, type AgentError, type AgentState, type AppliedConfig } from "./state.js";
import { errorMessage } from "../core/error-message.js";

/** A config the node knows by its text: what HAProxy runs, or what haproxy.cfg holds. */
export interface KnownConfig {
  text: string;
  sha256: string;
  /** null: a config on disk the agent cannot name (see state.ts). */
  key: string | null;
  revision: string | null;
}

interface Failure {
  key: string;
  attempts: number;
  retryAt: number;
}

export interface ApplierStatus {
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
  /** Stage timing (bench/e2e); none by default. */
  trace?: StageTrace;
}

export class NodeState {
  /** What HAProxy runs (runtime API changes included); null until a config is known. */
  current: KnownConfig | null = null;
  /** What haproxy.cfg holds: always a config that passed `haproxy -c` (or the file found at start). */
  onDisk: KnownConfig | null = null;
  /** HAProxy was started (by the agent) and runs `current`. */
  started = false;
  /**
   * What the slots run is not known (undoing runtime changes failed and no reload has restored
   * the file's config yet): the next change goes through a reload, never a runtime diff.
   */
  liveUnknown = false;
  private failure: Failure | null = null;
  private state: AgentState;

  constructor(private readonly options: NodeStateOptions) {
    let applied: AppliedConfig | null = null;
    if (options.disk !== null) {
      // In the recorded config's kind, so that the file is recognised as the config last applied.
      const sha = configDigest(digestKind(options.saved.applied?.sha256 ?? ""), options.disk);
      const known = options.saved.applied?.sha256 === sha ? options.saved.applied : null;
      this.current = this.onDisk = {
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

  /** What the node knows; the pull loop adds what it knows of the store (pin, skipped keys). */
  status(): Omit<ApplierStatus, "pinned" | "skipped"> {
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

  /** What failed while HAProxy was down must not wait out a backoff. */
  forgetFailure(): void {
    this.failure = null;
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

  async succeed(
    config: Omit<StoredConfig, "key" | "revision"> & { key: string | null; revision: string | null },
    how: AppliedConfig["how"],
    t0: number,
    lastError: AgentError | null = null,
  ): Promise<void> {
    const { metrics, log } = this.options;
    this.current = this.onDisk = {
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
    this.options.trace?.("applied", { key: config.key, how });
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
