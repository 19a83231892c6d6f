/*
 * A full pass, the reconcile function's sync handler (docs/design.md#the-pipeline, steps 1-5):
 * list the cluster, build and render, publish, ping the agents, record the outcome. One straight
 * script over explicit state: what the instance carries between runs (WarmState) and what this
 * pass has done so far (PassRun). When it runs, and what it runs for, app/pass-queue.ts decides.
 */

import { ClusterError } from "../adapters/cluster-error.js";
import type { Logger } from "../adapters/log.js";
import { type PublishResult, type SkippedKey, StoreError } from "../adapters/store.js";
import { digestKind } from "../core/publish/config-digest.js";
import { DeadlineError } from "../core/deadline.js";
import { msSince } from "../core/render/milliseconds.js";
import { holdPendingServices, serviceKey } from "../core/kubernetes/pending-services.js";
import type { RenderResult } from "../core/render/pipeline.js";
import type { Verdict } from "./cloudevents.js";
import type { HeadStart } from "./head-start.js";
import type { Stage } from "./pass-record.js";
import type { LiveSnapshot, NotifyCounts, RunTag } from "./pass-steps.js";
import { type Instance, type RunDeadline, runDeadline, type WarmState } from "./warm-instance.js";

export interface Trigger {
  id: string;
  type: string;
}

export interface ReconcileResult {
  eventId: string;
  eventType: string;
  verdict: Verdict;
  /**
   * ignored: the event cannot change the config (or was not understood); nothing was listed.
   * joined: it arrived while a full pass ran or waited to run, and was answered at once; the pass
   * after it covers it (see `Reconciler.join`).
   */
  status: "ignored" | "joined" | "published" | "unchanged" | "stale";
  /** The epoch the config belongs to (it advances when the cluster's revisions go back). */
  epoch?: number;
  /** This pass found the cluster's revisions gone back and published into a new epoch. */
  restored?: { mark: { epoch: number; revision: string }; live: string; snapshot: string };
  /** Newer keys in the store that did not verify. */
  skipped?: SkippedKey[];
  /** unchanged: the view marker this pass left. */
  view?: string;
  reason?: string;
  /** The snapshot revision. */
  revision?: string;
  /** The key this config has (published), shares (unchanged), or would have had (stale). */
  key?: string;
  sha256?: string;
  /** The newest config in the store after this pass. */
  newestKey?: string;
  counts?: { services: number; backends: number; servers: number; bytes: number; warnings: number; skipped: number };
  notify?: NotifyCounts;
  /** Services new to this instance left out until their EndpointSlices arrive (core/kubernetes/pending-services.ts). */
  held?: string[];
  /** How many old configs this pass deleted (after notifying), when it pruned. */
  pruned?: number;
  /** A warm instance's head start (app/head-start.ts), before the pass's full list. */
  headStart?: HeadStart;
  durationsMs?: { list: number; build: number; render: number; publish: number; notify: number };
}

/** What one pass has done so far: its stage (for the deadline's message and the failure), and how long each took. */
interface PassRun extends RunTag {
  readonly trigger: Trigger;
  readonly verdict: Verdict;
  readonly log: Logger;
  readonly deadline: RunDeadline;
  stage: Stage;
  readonly durationsMs: NonNullable<ReconcileResult["durationsMs"]>;
}

const LOGGED_WARNINGS = 50;

/**
 * A full pass for `trigger`. `giveWay` lets head starts under way go first (app/pass-queue.ts).
 * A failure is logged, recorded and thrown: the delivery fails and the Broker retries it.
 */
export async function runPass(
  at: Instance,
  state: WarmState,
  trigger: Trigger,
  verdict: Verdict,
  giveWay: () => Promise<void>,
): Promise<ReconcileResult> {
  const n = at.nextRun();
  const run: PassRun = {
    n,
    headStart: false,
    trigger,
    verdict,
    log: at.log.child({ eventId: trigger.id, eventType: trigger.type }),
    deadline: runDeadline(at.settings.passTimeoutMs, () => run.stage),
    stage: "list",
    durationsMs: { list: 0, build: 0, render: 0, publish: 0, notify: 0 },
  };
  // Beside the list: only an instance's first pass waits for the agents' reports.
  const digest = at.reports.forPass();
  try {
    await giveWay();
    const first = await list(at, state, run);
    // The safer of the pass's choice and what a read decided since: sha256 if either says so.
    const chosen = await run.deadline.guard(digest);
    await giveWay();
    const outcome = await at.turns.take(() => renderAndPublish(at, state, run, first, chosen === "tree1"));
    const { published, regression } = outcome;
    if (published.newEpoch) {
      run.log.warn(
        { epoch: published.epoch, key: published.key, ...regression },
        `published into epoch ${published.epoch}: the cluster's revisions went back`,
      );
    }
    if (published.skipped.length > 0) {
      run.log.warn(
        { skipped: published.skipped },
        "newer config keys in the store do not verify and were skipped: delete them, and find out who wrote them",
      );
    }
    // After the pings, not before: deleting old configs must not delay the new one's arrival.
    const due = published.pruneDue === true || state.pruneDue;
    state.pruneDue = false;
    const pruned = due ? await prune(at, run.log) : undefined;
    const result = resultOf(run, outcome, pruned);
    const { eventId: _id, eventType: _type, ...fields } = result;
    run.log.info(fields, `reconciled: ${result.status}`);
    at.recorder.record(null);
    // Behind the publish, never in its way (app/gateway-status.ts); a stale pass's view is behind.
    if (outcome.status !== "stale")
      at.gatewayStatus.afterPass({
        status: outcome.rendered.gatewayStatus,
        objects: outcome.snapshot.gateway,
        key: outcome.published.key,
      });
    return result;
  } catch (err) {
    const { stage, durationsMs } = run;
    const transient =
      (err instanceof ClusterError || err instanceof StoreError || err instanceof DeadlineError) && err.transient;
    if (transient) {
      run.log.warn(
        { err, stage, durationsMs },
        `reconcile failed at ${stage} (transient); failing the delivery so that the Broker retries`,
      );
    } else {
      // Also a failure (5xx), not an acknowledgement: the Broker retries a few times and then
      // dead-letters the event, which is where an operator looks. Acknowledging would hide a
      // broken RBAC rule or store until someone noticed stale configs.
      run.log.error(
        { err, stage, durationsMs },
        `reconcile failed at ${stage} and retrying will not help until the cause is fixed`,
      );
    }
    at.recorder.record({ stage, err, transient, eventId: trigger.id });
    throw err;
  }
}

interface Listed {
  ticket: number;
  listed: LiveSnapshot;
}

async function list(at: Instance, state: WarmState, run: PassRun): Promise<Listed> {
  run.stage = "list";
  const t = performance.now();
  const ticket = state.view.ticket();
  const listed = await run.deadline.guard(at.steps.list(run, run.deadline.signal));
  run.durationsMs.list = msSince(t);
  for (const warning of listed.listWarnings) run.log.warn({ warning }, "cluster list warning");
  return { ticket, listed };
}

interface Outcome {
  status: "published" | "unchanged" | "stale";
  snapshot: LiveSnapshot;
  rendered: RenderResult;
  held: string[];
  published: PublishResult;
  regression: PublishResult["regression"];
  notify: NotifyCounts | undefined;
}

/** The pass's turn: render what the list gave, publish it, ping the agents. */
async function renderAndPublish(
  at: Instance,
  state: WarmState,
  run: PassRun,
  first: Listed,
  tree1: boolean,
): Promise<Outcome> {
  let { snapshot, rendered, held } = await render(at, state, run, state.view.listed(first.ticket, first.listed), tree1);
  let published = await publish(at, run, snapshot.revision, rendered, false);
  const regression = published.regression;
  if (published.status === "regressed") {
    // Evidence from a fresh list: the live cluster is behind what the store recorded (etcd
    // restore, a new cluster behind this store, a restarted local stack), or this snapshot
    // was listed before the cluster went back. Start again from a list taken now.
    run.log.warn(
      { ...regression },
      "the cluster's revision is behind the newest view recorded in the store: listing it again to publish into a new epoch",
    );
    at.ctx.forgetLiveState();
    state.view.forget();
    state.renderedServices = undefined;
    state.newest = undefined;
    const again = await list(at, state, run);
    ({ snapshot, rendered, held } = await render(at, state, run, state.view.listed(again.ticket, again.listed), tree1));
    published = await publish(at, run, snapshot.revision, rendered, true);
  }
  // A restore publish never asks for another one (see core/publish/publish-order.ts).
  if (published.status === "regressed")
    throw new Error(
      `publishing a fresh snapshot after a regression reported another regression: ${JSON.stringify(published.regression)}`,
    );
  // Before the pings: with canary on, rollout.json says which config each pinged node runs.
  await run.deadline.guard(at.rollouts.step(published.newest));
  let notify: NotifyCounts | undefined;
  if (published.status === "published") {
    run.stage = "notify";
    const t = performance.now();
    const report = await run.deadline.guard(
      at.steps.notify(run, { key: published.key, sha256: published.sha256, revision: snapshot.revision }),
    );
    run.durationsMs.notify = msSince(t);
    notify = { agents: report.agents, ok: report.ok, failed: report.failed };
  }
  state.renderedServices = new Set(snapshot.services.map(serviceKey));
  state.newest = published.status === "stale" ? undefined : published.newest;
  return { status: published.status, snapshot, rendered, held, published, regression, notify };
}

async function render(
  at: Instance,
  state: WarmState,
  run: PassRun,
  live: LiveSnapshot,
  tree1: boolean,
): Promise<{ snapshot: LiveSnapshot; rendered: RenderResult; held: string[] }> {
  run.stage = "render";
  const pending =
    run.verdict === "relevant" && state.renderedServices && !at.settings.options.forwardServices
      ? holdPendingServices(live, state.renderedServices)
      : { snapshot: live, held: [] };
  const snapshot: LiveSnapshot = { ...pending.snapshot, listWarnings: live.listWarnings };
  if (pending.held.length > 0)
    run.log.info({ held: pending.held }, "new Services held back until their EndpointSlices arrive");
  if (!at.ctx.hasLayout && at.ctx.renderer.routesByMap) {
    run.stage = "layout";
    await run.deadline.guard(loadLayout(at, run.log));
    run.stage = "render";
  }
  at.ctx.useDigest(tree1 ? at.reports.current : "sha256");
  const room = at.reports.room;
  at.ctx.useRoom(room);
  // Only a Gateway with an HTTPS listener waits for a cold instance's first read of who holds which certificate.
  const https = snapshot.gateway?.gateways.some((g) => g.spec.listeners.some((l) => l.protocol === "HTTPS")) ?? false;
  at.ctx.useCertificates(await run.deadline.guard(at.reports.certificatesForPass(https)));
  const rendered = at.steps.render(run, snapshot);
  run.durationsMs.build = rendered.stats.buildMs;
  run.durationsMs.render = rendered.stats.renderMs;
  if (rendered.warnings.length > 0) {
    // One line per pass rather than per warning: a resync repeats them every period.
    run.log.warn(
      {
        revision: snapshot.revision,
        count: rendered.warnings.length,
        warnings: rendered.warnings.slice(0, LOGGED_WARNINGS),
      },
      "render warnings",
    );
  }
  if (room !== null && rendered.stats.descriptors > room)
    run.log.warn(
      { descriptors: rendered.stats.descriptors, room },
      "the config needs more file descriptors than the smallest node has: nodes short of them refuse it and serve their last config",
    );
  return { snapshot, rendered, held: pending.held };
}

async function publish(
  at: Instance,
  run: PassRun,
  revision: string,
  config: RenderResult,
  restore: boolean,
): Promise<PublishResult> {
  run.stage = "publish";
  const t = performance.now();
  const { deadline } = run;
  const result = await deadline.guard(
    at.steps.publish(run, {
      config,
      revision,
      generator: at.generator,
      settings: at.recorded,
      ...(config.layout ? { layout: config.layout } : {}),
      liveRevision: () => deadline.guard(at.liveRevision(deadline.signal)),
      restore,
      // In chunks only by tree1: a fleet that reads chunks verifies tree1, and a sha256 config
      // is for an agent that reads nothing newer.
      chunked: at.reports.chunked && digestKind(config.sha256) === "tree1",
    }),
  );
  run.durationsMs.publish = msSince(t);
  return result;
}

/**
 * A cold instance places Services where the newest config has them, so that one that starts
 * while Services sit in spare backends does not move them back (a reload on every node). Without
 * a record (an older config, a store that fails now) the layout starts afresh: one reload.
 */
async function loadLayout(at: Instance, log: Logger): Promise<void> {
  try {
    const digest = (await at.store.latest())?.layoutDigest;
    if (digest) at.ctx.useLayout(await at.store.readLayout(digest));
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    log.warn({ err: err.message }, "cannot read the newest config's backend layout; placing Services afresh");
  }
}

/** A failed clean-up must not turn a successful publish into an error the Broker retries. */
async function prune(at: Instance, log: Logger): Promise<number> {
  try {
    return (await at.store.prune()).length;
  } catch (err) {
    if (!(err instanceof StoreError)) throw err;
    log.warn({ err: err.message }, "published, but pruning old configs failed; the next publish retries");
    return 0;
  }
}

function resultOf(run: PassRun, outcome: Outcome, pruned: number | undefined): ReconcileResult {
  const { status, snapshot, rendered, held, published, regression, notify } = outcome;
  return {
    eventId: run.trigger.id,
    eventType: run.trigger.type,
    verdict: run.verdict,
    status,
    epoch: published.epoch,
    ...(published.newEpoch && regression ? { restored: regression } : {}),
    ...(published.skipped.length > 0 ? { skipped: published.skipped } : {}),
    ...(published.view ? { view: published.view } : {}),
    revision: snapshot.revision,
    key: published.key,
    sha256: published.sha256,
    newestKey: published.newest.key,
    counts: {
      services: rendered.stats.services,
      backends: rendered.stats.backends,
      servers: rendered.stats.servers,
      bytes: rendered.stats.bytes,
      warnings: rendered.warnings.length,
      skipped: rendered.skipped.length,
    },
    notify,
    ...(held.length > 0 ? { held } : {}),
    ...(pruned !== undefined ? { pruned } : {}),
    durationsMs: run.durationsMs,
  };
}
