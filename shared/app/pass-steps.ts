/*
 * The edges a reconcile run goes through, one call each: list or read the cluster, render, publish,
 * ping the agents. Each call names the run it serves, so that whoever wraps the steps can tell
 * runs apart: createReconciler wires them, and an entry point may wrap them (the stage trace of
 * bench/e2e, app/pass-trace.ts) without the pass knowing.
 */

import type { ObjectRef } from "../adapters/cluster.js";
import type { NotifyPayload, NotifyReport } from "../adapters/notifier.js";
import type { PublishInput, PublishResult } from "../adapters/store.js";
import type { RenderResult } from "../core/render/pipeline.js";
import type { FreshReads } from "../core/kubernetes/snapshot-overlay.js";
import type { Snapshot } from "../core/kubernetes/snapshot.js";

/** `endpointKind`: which API the endpoints came from (v1 Endpoints on clusters without EndpointSlices). */
export type LiveSnapshot = Snapshot & { listWarnings: string[]; endpointKind?: "EndpointSlice" | "Endpoints" };

/** Which run a step serves: full passes and head starts are numbered together, as their log lines are. */
export interface RunTag {
  readonly n: number;
  /** A head start (app/head-start.ts) rather than a full pass. */
  readonly headStart: boolean;
}

/** What the pings of a published config came to. */
export interface NotifyCounts {
  agents: number;
  ok: number;
  failed: number;
}

export interface PassSteps {
  /** The live cluster, listed whole, scoped like the render. `signal` is the run's deadline. */
  list(run: RunTag, signal: AbortSignal): Promise<LiveSnapshot>;
  /** The named objects as the live cluster has them now (a head start). */
  read(run: RunTag, refs: readonly ObjectRef[], signal: AbortSignal): Promise<FreshReads>;
  /** Model and config, by the instance's render context (its caches, layout and digest). */
  render(run: RunTag, snapshot: Snapshot): RenderResult;
  /** One PutObject of the whole config under a new key: nothing partial is ever visible. */
  publish(run: RunTag, input: PublishInput): Promise<PublishResult>;
  notify(run: RunTag, payload: NotifyPayload): Promise<NotifyReport>;
}
