/*
 * Brings HAProxy to the newest published config: the pull loop. Each pass pulls (config-pull.ts:
 * the key a ping named, or the store's newest, or the one a pin or rollout.json names) and hands
 * the config to the apply steps (apply-steps.ts; decide.ts says runtime API or reload). The
 * stages go through an object the composition root may wrap (pull-stages.ts).
 *
 * - At most one pull in flight; requests during it fold into one more pull after it.
 * - After HAProxy restarts on its own it runs the file: unchecked runtime changes are dropped
 *   and the newest config is applied again from the file's.
 */

import { compareConfigKeys } from "../core/publish/config-key.js";
import { ApplySteps, type ApplyStepsOptions } from "./apply-steps.js";
import { ConfigPull, type ConfigPullOptions } from "./config-pull.js";
import { NodeState, type PullLoopStatus, type KnownConfig, type NodeStateOptions } from "./node-state.js";
import type { PullStages, StepOutcome } from "./pull-stages.js";

export type { PullLoopStatus } from "./node-state.js";
export type { HaproxyControl, RuntimePort } from "./apply-steps.js";

export interface PullLoopOptions extends NodeStateOptions, ApplyStepsOptions {
  store: ConfigPullOptions["store"];
  /** `--canary`: this node's name, by which each pull finds what rollout.json has it run. */
  canaryNode?: string;
}

export class PullLoop {
  private readonly node: NodeState;
  private readonly steps: ApplySteps;
  private readonly configs: ConfigPull;
  /** The pull stages, as the composition root may have wrapped them. */
  private readonly stages: PullStages;
  private inFlight: Promise<void> | undefined;
  private pending = false;
  private stopped = false;
  /** HAProxy was restarted by its supervisor on this file text (null: unknown); acted on in the loop. */
  private restarted: { text: string | null } | null = null;
  private readonly abort = new AbortController();

  constructor(private readonly options: PullLoopOptions) {
    this.node = new NodeState(options);
    this.steps = new ApplySteps(options, this.node, {
      stopped: () => this.stopped,
      pullRequested: () => this.pending,
      pinned: () => this.configs.held,
      signal: this.abort.signal,
    });
    this.configs = new ConfigPull(options, {
      node: this.node,
      steps: this.steps,
      stopped: () => this.stopped,
      take: (config, via, runningDistrusted) => this.stages.take(config, via, runningDistrusted),
    });
    const stages: PullStages = {
      notify: (key, sha256) => this.pullFor(key, sha256),
      busy: () => this.inFlight !== undefined && this.pulling,
      running: () => this.node.current?.key ?? null,
      pull: () => this.configs.pull(),
      take: (config, _via, runningDistrusted) => this.configs.take(config, runningDistrusted),
    };
    this.stages = options.decorate?.pull?.(stages) ?? stages;
  }

  /** HAProxy was started and runs a config the agent applied. */
  get serving(): boolean {
    return this.node.started && this.node.current !== null;
  }

  /** The config HAProxy serves, runtime changes included; null until it serves one. */
  get running(): KnownConfig | null {
    return this.serving ? this.node.current : null;
  }

  status(): PullLoopStatus {
    const pinned = this.configs.pinned;
    return {
      ...this.node.status(),
      pinned: pinned && { key: pinned.key, pinnedAt: pinned.pinnedAt },
      skipped: this.configs.skippedKeys(),
    };
  }

  /** The gate window of the rollout this node takes part in (docs/design.md#canary-rollouts); null outside one. */
  get rolloutWindow(): string | null {
    return this.configs.rolloutWindow;
  }

  /** Key of the running config, if known. */
  get appliedKey(): string | null {
    return this.node.current?.key ?? null;
  }

  /**
   * Look for a newer config and apply it. Coalescing: while a pull runs, any number of calls
   * cause exactly one more pull after it. Never rejects: outcomes are in status().
   */
  sync(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.pending = true;
    return this.run();
  }

  /** Runs the loop unless it runs already (it looks at `pending` again before it ends). */
  private run(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    this.inFlight = this.drain().finally(() => {
      this.inFlight = undefined;
      // Asked for between the loop's last look and here (a microtask): run again.
      if (!this.stopped && (this.pending || this.restarted)) void this.run();
    });
    return this.inFlight;
  }

  /**
   * A ping named `key` (with its digest): pull unless that config (or a newer one) already runs.
   * The key is fetched directly, without listing the store, if it sorts after the running one.
   * Returns at once.
   */
  notify(key: string, sha256?: string): "pulling" | "current" {
    return this.stages.notify(key, sha256);
  }

  private pullFor(key: string, sha256?: string): "pulling" | "current" {
    if (this.node.current?.key && compareConfigKeys(key, this.node.current.key) <= 0) return "current";
    if (sha256 !== undefined) this.configs.offer(key, sha256);
    void this.sync();
    return "pulling";
  }

  /**
   * HAProxy was restarted after dying on its own: it runs the file (`fileText`, read when it was
   * started), not runtime changes made to the dead one after the file was last written. The
   * newest config is applied again from what runs.
   */
  haproxyRestarted(fileText: string | null): void {
    if (this.stopped || !this.node.started) return;
    this.restarted = { text: fileText };
    void this.sync();
  }

  /**
   * Refuses new work at once (pings, polls, a restart), kills a `haproxy -c` in flight and waits
   * only for the step in progress. An abandoned check leaves the file at the last config that
   * passed; the next start pulls the newest again.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.restarted = null;
    while (this.inFlight) await this.inFlight;
  }

  /** True while a pull or an apply runs. */
  private pulling = false;

  /** Pulls while asked to. */
  private async drain(): Promise<void> {
    for (;;) {
      if (this.restarted && !this.stopped) {
        const { text } = this.restarted;
        this.restarted = null;
        this.resetAfterRestart(text);
      }
      if (this.pending && !this.stopped) {
        this.pending = false;
        this.pulling = true;
        try {
          this.after(await this.stages.pull());
          await this.steps.ensureStarted();
        } catch (err) {
          // Every expected failure is recorded where it happens; this is a bug, but the loop must go on.
          this.options.log.error({ err }, "unexpected error while applying a config");
        } finally {
          this.pulling = false;
        }
        continue;
      }
      return;
    }
  }

  private resetAfterRestart(fileText: string | null): void {
    const dropped = this.node.restartedOn(fileText);
    this.options.log.warn(
      { running: this.node.current?.key ?? null, dropped },
      "HAProxy was restarted on the config file: applying the newest config again from it",
    );
    this.configs.forgetHint();
    this.pending = true;
  }

  /** Runtime changes newer than the file were dropped: the newest config is pulled again. */
  private after(outcome: StepOutcome): void {
    if (outcome === "dropped") this.pending = true;
  }
}
