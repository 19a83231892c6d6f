/*
 * The event-triggered pipeline (docs/design.md#the-pipeline, steps 1-5): list the cluster, build, render, publish,
 * ping the agents. Stateless apart from what a warm instance caches (templates, clients): the
 * object store decides what is newest, so two instances may run side by side.
 */

import type { CloudEvent } from "@google-cloud/functions-framework";
import type { Snapshot } from "../core/snapshot.js";
import type { RenderResult } from "../core/pipeline.js";
import { envName, OptionsError } from "../core/settings.js";
import { holdPendingServices, serviceKey } from "../core/pending-services.js";
import { msSince } from "../core/milliseconds.js";
import { digestKind } from "../core/config-digest.js";
import { settingsRecord } from "../core/settings-record.js";
import { ClusterError, loadKubeConfig, readClusterRevision } from "../adapters/cluster.js";
import type { Logger } from "../adapters/log.js";
import { createNotifier, type Notifier } from "../adapters/notifier.js";
import {
  type ConfigRef,
  StoreError,
  type ObjectStore,
  type PassRecord,
  type PublishResult,
  type SkippedKey,
} from "../adapters/store.js";
import { readFreshObjects, readLiveSnapshot } from "../adapters/snapshot-source.js";
import type { ObjectRef } from "../adapters/cluster.js";
import { readRevision, type FreshReads } from "../core/snapshot-overlay.js";
import { LiveView } from "../core/live-view.js";
import { packageVersion } from "../adapters/package-version.js";
import { NO_TRACE, type StageTrace } from "../adapters/stage-trace.js";
import { classifyEvent, type EventObject, type Verdict } from "./cloudevents.js";
import { DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN } from "../core/k8s-names.js";
import { DeadlineError, withDeadline } from "./deadline.js";
import { requireStore, type FunctionSettings } from "./function-options.js";
import { openStore } from "../adapters/open-store.js";
import { RenderContext } from "./render-context.js";
import { Coalescer, Settled } from "./pass-queue.js";
import { backoffDelay, type Backoff } from "../core/backoff.js";
import { AgentReports } from "./agent-reports.js";
import { gatewayStatusUpdater } from "./gateway-status.js";

/** `endpointKind`: which API the endpoints came from (v1 Endpoints on clusters without EndpointSlices). */
export type LiveSnapshot = Snapshot & { listWarnings: string[]; endpointKind?: "EndpointSlice" | "Endpoints" };

export interface ReconcileDeps {
  log: Logger;
  /** Default: the store named by the settings, credentials from the standard AWS chain. */
  store?: ObjectStore;
  /** Default: the agents named by the settings. */
  notifier?: Notifier;
  /** Default: the live cluster, scoped like the render. `signal` is the pass's deadline. */
  readSnapshot?: (signal: AbortSignal) => Promise<LiveSnapshot>;
  /** The named objects as the live cluster has them now (a warm head start). Default: a GET each. */
  readObjects?: (refs: readonly ObjectRef[], signal: AbortSignal) => Promise<FreshReads>;
  /** The live cluster's revision by a fresh, cheap list. Default: a one-item list of Services. */
  liveRevision?: (signal: AbortSignal) => Promise<string>;
  /** Recorded with each published config. Default "servicelb/<package version>". */
  generator?: string;
  /** Stage timing (bench/e2e); none by default. */
  trace?: StageTrace;
  /** How often a warm instance reads the agents' reports again to choose the digest. Default DIGEST_RECHECK_MS. */
  digestRecheckMs?: number;
}

/** Where a pass is; "layout" is a cold instance reading the newest config's backend layout from the store. */
export type Stage = "list" | "layout" | "render" | "publish" | "notify";

export interface ReconcileResult {
  eventId: string;
  eventType: string;
  verdict: Verdict;
  /**
   * ignored: the event cannot change the config (or was not understood); nothing was listed.
   * joined: it arrived while a full pass ran or waited to run, and was answered at once; the pass
   * after it covers it (see `join`).
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
  notify?: { agents: number; ok: number; failed: number };
  /** Services new to this instance left out until their EndpointSlices arrive (core/pending-services.ts). */
  held?: string[];
  /** How many old configs this pass deleted (after notifying), when it pruned. */
  pruned?: number;
  /** A warm instance's head start (see HeadStart), before the pass's full list. */
  headStart?: HeadStart;
  durationsMs?: { list: number; build: number; render: number; publish: number; notify: number };
}

/**
 * What a warm instance did before its full list: the objects the events named, read again from the
 * API server and laid over its last list (core/snapshot-overlay.ts), rendered and published, so
 * that a change reaches the agents without waiting for a list of the whole cluster. The full list
 * follows in the same pass whatever happened here: it is what makes the pass level-triggered.
 */
export interface HeadStart {
  /**
   * skipped: nothing was read (reason says why); failed: a read or the publish failed (reason);
   * unchanged with HELD_ONLY as its reason: nothing was rendered (held names the Services).
   */
  status: PublishResult["status"] | "skipped" | "failed";
  reason?: string;
  /** Set when every object it read was a new Service left out until its EndpointSlices arrive. */
  held?: string[];
  key?: string;
  /** Objects named by the events. */
  objects: number;
  /** The pings of what it published. */
  notify?: ReconcileResult["notify"];
  ms: number;
}

/** Why a head start rendered nothing: every object it read was a new Service held back. */
export const HELD_ONLY = "every object read is a new Service waiting for its EndpointSlices: nothing to render";
/** More objects than this named by the events one head start would read, and the pass only lists. */
const MOST_HINTED = 32;
/** The longest a full list behind served head starts waits, in confirmDelayMs. */
const CONFIRM_WAIT_FACTOR = 5;
/** How many head starts a full pass lets go first at each of its steps. */
const GIVE_WAY = 3;
/**
 * Per read of a head start: a read is a small GET, and the event's full pass waits for its head
 * start, so a throttled API server must not hold it for the list's 30 s.
 */
const HEAD_START_READ_TIMEOUT_MS = 2000;
/**
 * How often a succeeding instance writes its pass record again when nothing else makes it: so
 * that a failure recorded by an instance that has gone since does not stand for longer.
 */
const PASS_RECORD_REFRESH_MS = 60_000;
/** A failure's message in the pass record is cut here: the log line has it whole. */
const MESSAGE_CHARS = 1000;
/**
 * How the instance retries a failed pass that events answered at once were waiting for (`join`):
 * no Broker retries them. At most a minute apart, PingSource's period: a cluster or store that
 * stays down is asked no more often than the resync asks anyway.
 */
const OWED_RETRY: Backoff = { initialMs: 1000, maxMs: 60_000 };

export interface Reconciler {
  /** Classifies a CloudEvent and, when it may change the config, runs a full pass. */
  reconcile(event: unknown): Promise<ReconcileResult>;
  /**
   * Takes an event that joins the next pass whatever runs now (see `join`), answered by its caller
   * without waiting: the function's thread does so while the pipeline's says it is busy.
   */
  join(event: unknown): void;
  /** Told when passes, or head starts that end in one, start to run or wait (true), and when the last has ended (false). */
  onBusy(listener: (busy: boolean) => void): void;
  /** A full pass regardless of any event (the CLI's `reconcile --once`). */
  reconcileNow(trigger: { id: string; type: string }): Promise<ReconcileResult>;
  /**
   * Settles once the work of every event answered at once (status joined) has, its retries left
   * aside, and the Gateway API status writes behind the passes (app/gateway-status.ts): what a
   * caller that wants to see their outcome in the store or the cluster waits for.
   */
  idle(): Promise<void>;
  /** Closes the store once the passes' records are written (a shell's pass exits right after). */
  close(): Promise<void>;
}

const LOGGED_WARNINGS = 50;

export function createReconciler(settings: FunctionSettings, deps: ReconcileDeps): Reconciler {
  const log = deps.log;
  const trace = deps.trace ?? NO_TRACE;
  const store = deps.store ?? openStore(requireStore(settings));
  const notifier =
    deps.notifier ??
    createNotifier(
      {
        agents: settings.notify.agents,
        agentService: settings.notify.agentService,
        agentPort: settings.notify.agentPort,
        kube: { kubeconfig: settings.kubeconfig, context: settings.context },
        token: settings.notify.token,
        tokenFile: settings.notify.tokenFile,
        timeoutMs: settings.notify.timeoutMs,
        concurrency: settings.notify.concurrency,
        deadlineMs: settings.notify.deadlineMs,
      },
      log,
    );
  const ctx = new RenderContext(settings.options, { template: settings.template });
  const kube = { kubeconfig: settings.kubeconfig, context: settings.context };
  const readSnapshot =
    deps.readSnapshot ??
    ((signal: AbortSignal) => readLiveSnapshot(settings.options, { ...kube, signal }, ctx.liveItems));
  const readObjects =
    deps.readObjects ??
    ((refs: readonly ObjectRef[], signal: AbortSignal) =>
      readFreshObjects(
        settings.options,
        { ...kube, signal, timeoutMs: HEAD_START_READ_TIMEOUT_MS },
        refs,
        ctx.liveItems,
      ));
  const liveRevision =
    deps.liveRevision ??
    ((signal: AbortSignal) =>
      readClusterRevision(loadKubeConfig(kube), { namespace: settings.options.namespace, signal }));
  const recorded = settingsRecord(settings.options, ctx.template);
  const reports = new AgentReports(
    settings.digest,
    () => store.readStatuses(),
    async () => {
      const found = await notifier.discover();
      return found.error ? undefined : found.agents.length;
    },
    log,
    deps.digestRecheckMs,
  );
  const gatewayStatus = gatewayStatusUpdater(kube, () => store.readStatuses(), log);
  const generator = deps.generator ?? `servicelb/${packageVersion()}`;
  const hasAgents = settings.notify.agents.length > 0 || settings.notify.agentService !== undefined;
  if (hasAgents && !settings.notify.token && !settings.notify.tokenFile) {
    // Agents refuse unauthenticated pings: without a token every ping would fail with 401.
    throw new OptionsError(
      `${envName("notifyTokenFile")} or ${envName("notifyToken")} is required when agents are configured (the agents' /notify needs the bearer token)`,
    );
  }
  if (!hasAgents) {
    log.info(
      "no agents configured (SERVICELB_AGENTS, SERVICELB_AGENT_SERVICE): nobody is pinged, agents rely on their poll",
    );
  }

  /**
   * The store's record of the last full pass (reconcile.json), which `servicelb status` reports: a
   * failure at once, a success when this instance recorded a failure or no record lately. The
   * writes go out one after another, behind the pass: they never delay a delivery's answer, and a
   * store that cannot take one is the failure being recorded.
   */
  let failing: { since: string; passes: number } | null = null;
  let recordedAt: number | undefined;
  let recordedFailure = false;
  let recording: Promise<void> = Promise.resolve();
  function recordPass(failure: { stage: Stage; err: unknown; transient: boolean; eventId: string } | null): void {
    const at = new Date().toISOString();
    failing = failure ? { since: failing?.since ?? at, passes: (failing?.passes ?? 0) + 1 } : null;
    const due = recordedAt === undefined || Date.now() - recordedAt >= PASS_RECORD_REFRESH_MS;
    if (!failure && !recordedFailure && !due) return;
    recordedAt = Date.now();
    recordedFailure = failure !== null;
    const record: PassRecord = {
      at,
      generator,
      failure:
        failure && failing
          ? {
              ...failing,
              stage: failure.stage,
              message: (failure.err instanceof Error ? failure.err.message : String(failure.err)).slice(
                0,
                MESSAGE_CHARS,
              ),
              transient: failure.transient,
              eventId: failure.eventId,
            }
          : null,
    };
    recording = recording
      .then(() => store.putPassRecord(record))
      .catch((err: unknown) => log.warn({ err }, "cannot record the pass in the store (reconcile.json)"));
  }

  /** A failed clean-up must not turn a successful publish into an error the Broker retries. */
  async function prune(plog: Logger): Promise<number> {
    try {
      return (await store.prune()).length;
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      plog.warn({ err: err.message }, "published, but pruning old configs failed; the next publish retries");
      return 0;
    }
  }

  /**
   * A cold instance places Services where the newest config has them, so that one that starts
   * while Services sit in spare backends does not move them back (a reload on every node). Without
   * a record (an older config, a store that fails now) the layout starts afresh: one reload.
   */
  async function loadLayout(plog: Logger): Promise<void> {
    try {
      const digest = (await store.latest())?.layoutDigest;
      if (digest) ctx.useLayout(await store.readLayout(digest));
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      plog.warn({ err: err.message }, "cannot read the newest config's backend layout; placing Services afresh");
    }
  }

  /**
   * The Services the last render rendered; undefined on a cold instance, which holds nothing back
   * (it cannot tell a new Service from one the newest config already serves).
   */
  let renderedServices: Set<string> | undefined;
  /** The last full list, with the objects head starts read since (core/live-view.ts). */
  const view = new LiveView<LiveSnapshot>();
  /**
   * The newest config in the store after this instance's last publish or pass. A head start builds
   * on the view only while that config is still the newest, i.e. while no other instance has
   * published over it; undefined when another one has.
   */
  let newest: ConfigRef | undefined;
  /** A head start's publish left more configs than the store retains: the next pass prunes. */
  let pruneDue = false;
  let passes = 0;

  /**
   * Renders and publishes run one at a time (head starts and full passes alike): each renders from
   * the view as the one before left it, with the render context's caches to itself, and publishes
   * in that order. Reads and lists run outside, so that a head start need not wait for a full list.
   */
  let exclusive: Promise<unknown> = Promise.resolve();
  function exclusively<T>(work: () => Promise<T>): Promise<T> {
    const run = exclusive.then(work, work);
    exclusive = run.catch(() => undefined);
    return run;
  }

  function deadlineOf(stage: () => string) {
    const deadline = AbortSignal.timeout(settings.passTimeoutMs);
    const guard = <T>(work: Promise<T>) =>
      withDeadline(
        deadline,
        () =>
          `the reconcile pass exceeded its deadline of ${settings.passTimeoutMs} ms (${envName("passTimeoutMs")}) at ${stage()}; it was abandoned`,
        work,
      );
    return { deadline, guard };
  }

  /**
   * A head start (see HeadStart). It never fails the event's delivery: whatever goes wrong here,
   * the full pass that follows decides. It publishes at the view's revision, that of the newest
   * object read (core/snapshot-overlay.ts), and only over the newest config this instance last saw:
   * never over another instance's publish, and a list taken before the change it read cannot
   * publish over it.
   */
  async function headStart(refs: readonly ObjectRef[]): Promise<HeadStart> {
    const t = performance.now();
    const done = (status: HeadStart["status"], more: Partial<HeadStart> = {}): HeadStart => ({
      status,
      objects: refs.length,
      ms: msSince(t),
      ...more,
    });
    const from = view.snapshot;
    if (!from || !renderedServices) return done("skipped", { reason: "no full list on this instance yet" });
    if (newest === undefined)
      return done("skipped", { reason: "another instance published since this instance's last list" });
    if (refs.length > MOST_HINTED) return done("skipped", { reason: `more than ${MOST_HINTED} objects changed` });
    if (from.endpointKind === "Endpoints" || from.endpoints.length > 0)
      return done("skipped", { reason: "the cluster serves v1 Endpoints, not EndpointSlices" });
    const n = ++passes;
    const plog = log.child({ headStart: n });
    trace("pass.start", { n, step: "head-start" });
    let stage = "read";
    const { deadline, guard } = deadlineOf(() => stage);
    try {
      const ticket = view.ticket();
      const fresh = await guard(readObjects(refs, deadline));
      trace("pass.read", { n, revision: readRevision(fresh) });
      const report = await exclusively(async () => {
        trace("pass.turn", { n });
        const snapshot = view.read(ticket, fresh);
        const expected = newest;
        if (!snapshot || !renderedServices || expected === undefined)
          return done("skipped", { reason: "the view was reset meanwhile" });
        stage = "publish";
        const pending = settings.options.forwardServices
          ? { snapshot, held: [] }
          : holdPendingServices(snapshot, renderedServices);
        // A new Service's own event, before its slices: nothing it read is to be published, so
        // nothing is rendered, and the slices' head start (often queued behind it) waits less.
        // Whatever else the view holds that the newest config lacks (a publish that failed after
        // its list) came with an event of its own, whose pass publishes it.
        const named = refs.map((r) => `${r.namespace}/${r.name}`);
        if (refs.length > 0 && refs.every((r, i) => r.kind === "Service" && pending.held.includes(named[i]!)))
          return done("unchanged", { key: expected.key, held: named, reason: HELD_ONLY });
        // What the last read decided: a head start never waits for one.
        ctx.useDigest(reports.current);
        ctx.useRoom(reports.room);
        const rendered = ctx.render(pending.snapshot);
        // The bytes of the newest config this instance knows (a new Service held back beside objects
        // that changed nothing, an edit that renders nothing new): nothing to deliver, so no request to
        // the store that the next head start would wait behind. The full pass behind it records
        // the view, and settles what another instance may have published since
        // (docs/design.md#the-reconcile-function).
        if (rendered.sha256 === expected.sha256) return done("unchanged", { key: expected.key });
        const published = await guard(
          store.publish({
            config: rendered,
            revision: snapshot.revision,
            generator,
            settings: recorded,
            ...(rendered.layout ? { layout: rendered.layout } : {}),
            liveRevision: () => guard(liveRevision(deadline)),
            expectedNewest: expected.key,
          }),
        );
        trace("pass.published", { n, status: published.status, key: published.key, step: "head-start" });
        if (published.status !== "published" && published.status !== "unchanged") {
          newest = undefined;
          return done(published.status, { key: published.key });
        }
        newest = published.newest;
        renderedServices = new Set(pending.snapshot.services.map(serviceKey));
        if (published.status === "unchanged") return done("unchanged", { key: published.key });
        if (published.pruneDue) pruneDue = true;
        stage = "notify";
        const pinged = await guard(
          notifier.notify({ key: published.key, sha256: published.sha256, revision: snapshot.revision }),
        );
        trace("pass.notified", { n, step: "head-start" });
        return done("published", {
          key: published.key,
          notify: { agents: pinged.agents, ok: pinged.ok, failed: pinged.failed },
        });
      });
      if (report.status === "published") plog.info({ ...report }, "head start: published");
      return report;
    } catch (err) {
      plog.warn({ err, stage, refs: refs.length }, "head start failed; the full pass decides");
      return done("failed", { reason: err instanceof Error ? err.message : String(err) });
    }
  }

  /** What a head start that threw before it could report says (it never fails the event's delivery). */
  function failedHeadStart(refs: readonly ObjectRef[], err: unknown): HeadStart {
    log.warn({ err, refs: refs.length }, "head start failed; the full pass decides");
    return { status: "failed", reason: err instanceof Error ? err.message : String(err), objects: refs.length, ms: 0 };
  }

  async function pass(trigger: { id: string; type: string }, verdict: Verdict): Promise<ReconcileResult> {
    const plog = log.child({ eventId: trigger.id, eventType: trigger.type });
    const n = ++passes;
    trace("pass.start", { n });
    const durationsMs = { list: 0, build: 0, render: 0, publish: 0, notify: 0 };
    let stage: Stage = "list";
    const { deadline, guard } = deadlineOf(() => stage);
    // Beside the list: only an instance's first pass waits for the agents' reports.
    const digest = reports.forPass();
    try {
      const list = async () => {
        stage = "list";
        const t = performance.now();
        const ticket = view.ticket();
        const listed = await guard(readSnapshot(deadline));
        durationsMs.list = msSince(t);
        trace("pass.listed", { n, revision: listed.revision });
        for (const warning of listed.listWarnings) plog.warn({ warning }, "cluster list warning");
        return { ticket, listed };
      };
      const render = async (live: LiveSnapshot) => {
        stage = "render";
        const pending =
          verdict === "relevant" && renderedServices && !settings.options.forwardServices
            ? holdPendingServices(live, renderedServices)
            : { snapshot: live, held: [] };
        const snapshot: LiveSnapshot = { ...pending.snapshot, listWarnings: live.listWarnings };
        if (pending.held.length > 0)
          plog.info({ held: pending.held }, "new Services held back until their EndpointSlices arrive");
        if (!ctx.hasLayout && ctx.renderer.routesByMap) {
          stage = "layout";
          await guard(loadLayout(plog));
          stage = "render";
        }
        ctx.useDigest(chosen === "tree1" ? reports.current : "sha256");
        const room = reports.room;
        ctx.useRoom(room);
        const rendered = ctx.render(snapshot);
        durationsMs.build = rendered.stats.buildMs;
        durationsMs.render = rendered.stats.renderMs;
        trace("pass.rendered", { n, buildMs: durationsMs.build, renderMs: durationsMs.render });
        if (rendered.warnings.length > 0) {
          // One line per pass rather than per warning: a resync repeats them every period.
          plog.warn(
            {
              revision: snapshot.revision,
              count: rendered.warnings.length,
              warnings: rendered.warnings.slice(0, LOGGED_WARNINGS),
            },
            "render warnings",
          );
        }
        if (room !== null && rendered.stats.descriptors > room)
          plog.warn(
            { descriptors: rendered.stats.descriptors, room },
            "the config needs more file descriptors than the smallest node has: nodes short of them refuse it and serve their last config",
          );
        return { snapshot, rendered, held: pending.held };
      };
      // One PutObject of the whole config under a new key: nothing partial is ever visible.
      const publish = async (revision: string, config: RenderResult, restore: boolean): Promise<PublishResult> => {
        stage = "publish";
        const t = performance.now();
        const result = await guard(
          store.publish({
            config,
            revision,
            generator,
            settings: recorded,
            ...(config.layout ? { layout: config.layout } : {}),
            liveRevision: () => guard(liveRevision(deadline)),
            restore,
            // In chunks only by tree1: a fleet that reads chunks verifies tree1, and a sha256 config
            // is for an agent that reads nothing newer.
            chunked: reports.chunked && digestKind(config.sha256) === "tree1",
          }),
        );
        durationsMs.publish = msSince(t);
        return result;
      };

      await giveWay();
      const first = await list();
      // The safer of the pass's choice and what a read decided since: sha256 if either says so.
      const chosen = await guard(digest);
      await giveWay();
      const outcome = await exclusively(async () => {
        let { snapshot, rendered, held } = await render(view.listed(first.ticket, first.listed));
        let published = await publish(snapshot.revision, rendered, false);
        const regression = published.regression;
        if (published.status === "regressed") {
          // Evidence from a fresh list: the live cluster is behind what the store recorded (etcd
          // restore, a new cluster behind this store, a restarted local stack), or this snapshot
          // was listed before the cluster went back. Start again from a list taken now.
          plog.warn(
            { ...regression },
            "the cluster's revision is behind the newest view recorded in the store: listing it again to publish into a new epoch",
          );
          ctx.forgetLiveState();
          view.forget();
          renderedServices = undefined;
          newest = undefined;
          const again = await list();
          ({ snapshot, rendered, held } = await render(view.listed(again.ticket, again.listed)));
          published = await publish(snapshot.revision, rendered, true);
        }
        // A restore publish never asks for another one (see core/publish-order.ts).
        if (published.status === "regressed")
          throw new Error(
            `publishing a fresh snapshot after a regression reported another regression: ${JSON.stringify(published.regression)}`,
          );
        trace("pass.published", { n, status: published.status, key: published.key });
        let notify: ReconcileResult["notify"];
        if (published.status === "published") {
          stage = "notify";
          const t = performance.now();
          const report = await guard(
            notifier.notify({ key: published.key, sha256: published.sha256, revision: snapshot.revision }),
          );
          durationsMs.notify = msSince(t);
          trace("pass.notified", { n });
          notify = { agents: report.agents, ok: report.ok, failed: report.failed };
        }
        renderedServices = new Set(snapshot.services.map(serviceKey));
        newest = published.status === "stale" ? undefined : published.newest;
        return { snapshot, rendered, held, published, status: published.status, regression, notify };
      });
      const { snapshot, rendered, held, published, status, regression, notify } = outcome;
      if (published.newEpoch) {
        plog.warn(
          { epoch: published.epoch, key: published.key, ...regression },
          `published into epoch ${published.epoch}: the cluster's revisions went back`,
        );
      }
      if (published.skipped.length > 0) {
        plog.warn(
          { skipped: published.skipped },
          "newer config keys in the store do not verify and were skipped: delete them, and find out who wrote them",
        );
      }
      // After the pings, not before: deleting old configs must not delay the new one's arrival.
      const due = published.pruneDue === true || pruneDue;
      pruneDue = false;
      const pruned = due ? await prune(plog) : undefined;

      const result: ReconcileResult = {
        eventId: trigger.id,
        eventType: trigger.type,
        verdict,
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
        durationsMs,
      };
      const { eventId: _id, eventType: _type, ...fields } = result;
      plog.info(fields, `reconciled: ${result.status}`);
      recordPass(null);
      // Behind the publish, never in its way (app/gateway-status.ts); a stale pass's view is behind.
      if (status !== "stale")
        gatewayStatus.afterPass({ status: rendered.gatewayStatus, objects: snapshot.gateway, key: published.key });
      trace("pass.end", { n });
      return result;
    } catch (err) {
      const transient =
        (err instanceof ClusterError || err instanceof StoreError || err instanceof DeadlineError) && err.transient;
      if (transient) {
        plog.warn(
          { err, stage, durationsMs },
          `reconcile failed at ${stage} (transient); failing the delivery so that the Broker retries`,
        );
      } else {
        // Also a failure (5xx), not an acknowledgement: the Broker retries a few times and then
        // dead-letters the event, which is where an operator looks. Acknowledging would hide a
        // broken RBAC rule or store until someone noticed stale configs.
        plog.error(
          { err, stage, durationsMs },
          `reconcile failed at ${stage} and retrying will not help until the cause is fixed`,
        );
      }
      recordPass({ stage, err, transient, eventId: trigger.id });
      throw err;
    }
  }

  /**
   * One pass at a time per instance. Events that arrive while a pass runs share one follow-up
   * pass, which lists the cluster after all of them arrived: a burst of 100 events costs two
   * passes, not 100 lists, writes and pings. Across instances the store's key order still
   * keeps a stale write from winning. A resync among the coalesced events makes the follow-up a
   * resync: it holds nothing back.
   */
  type PassInput = { trigger: { id: string; type: string }; verdict: Verdict };
  const passQueue = new Coalescer<PassInput, ReconcileResult>(
    (input) => owedPass(input),
    (pending, later) => (later.verdict === "resync" ? { ...pending, verdict: "resync" } : pending),
  );

  /**
   * Events answered at once (`join`) are this instance's to deliver: no Broker retries them. Full
   * passes are numbered as they start; `owedThrough` is the first pass that starts after the last
   * such event arrived, the one whose success covers every one of them. When that pass (or a later
   * one) fails, the instance retries it after a backoff, and only then: a pass that fails while
   * another is queued behind it leaves the retry to that one, and a pass that succeeds meanwhile
   * (another event's) makes the retry moot.
   */
  let started = 0;
  /** The work of the events answered at once, until it settles (`idle`). */
  const joined = new Set<Promise<void>>();
  let owedThrough: number | undefined;
  let retries = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  async function owedPass(input: PassInput): Promise<ReconcileResult> {
    const n = ++started;
    try {
      const result = await pass(input.trigger, input.verdict);
      if (owedThrough !== undefined && n >= owedThrough) owedThrough = undefined;
      retries = 0;
      clearTimeout(retryTimer);
      return result;
    } catch (err) {
      if (owedThrough !== undefined && n >= owedThrough) retryOwed(input);
      throw err;
    }
  }
  function retryOwed(failed: PassInput): void {
    const delayMs = backoffDelay(OWED_RETRY, ++retries);
    log.warn(
      { retryInMs: delayMs, retries, eventId: failed.trigger.id },
      "a pass that events answered at once were waiting for failed: this instance retries it",
    );
    clearTimeout(retryTimer);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      const trigger = { id: `${failed.trigger.id}/retry-${retries}`, type: failed.trigger.type };
      // Its failure arms the next retry (owedPass); nobody else awaits it.
      passQueue.submit({ trigger, verdict: failed.verdict }).catch(() => undefined);
    }, delayMs);
    // A shell's `reconcile --once` never owes a pass; nothing here should hold a process open.
    retryTimer.unref();
  }

  /**
   * An event that arrives while a full pass runs or waits to run (or a head start, which ends in
   * one) joins the pass after it and is answered at once (204, like every acknowledgement): that pass starts after the event arrived,
   * so its list has the change, and a burst of events (the watch storm of a big cluster: an ADDED
   * event per object) costs the Broker no delivery held for a pass, no timeout and no retry of an
   * event whose change is on its way anyway. The event's head start runs as it would have,
   * behind the answer.
   */
  function join(trigger: PassInput["trigger"], verdict: "relevant" | "resync", refs: readonly ObjectRef[]) {
    owedThrough = started + 1;
    // A failure is logged by the pass, and retried by owedPass.
    const work = (verdict === "resync" ? coalesced(trigger, verdict) : withHeadStart(trigger, refs)).then(
      () => undefined,
      () => undefined,
    );
    joined.add(work);
    void work.then(() => joined.delete(work));
    log.debug({ eventId: trigger.id, eventType: trigger.type, verdict }, "event joined the next pass");
    const result: ReconcileResult = { eventId: trigger.id, eventType: trigger.type, verdict, status: "joined" };
    return result;
  }
  const coalesced = (trigger: PassInput["trigger"], verdict: Verdict) => passQueue.submit({ trigger, verdict });

  /** Head starts the same way, apart from passes: the objects named meanwhile are read together by the next one. */
  const refId = (ref: ObjectRef) => `${ref.kind} ${ref.namespace}/${ref.name}`;
  const headStarts = new Coalescer<Map<string, ObjectRef>, HeadStart>(
    (refs) => headStart([...refs.values()]).catch((err: unknown) => failedHeadStart([...refs.values()], err)),
    (pending, later) => new Map([...pending, ...later]),
  );
  const headStartSoon = (refs: readonly ObjectRef[]) => headStarts.submit(new Map(refs.map((r) => [refId(r), r])));

  /**
   * A full pass gives way to a head start under way, a few times at most: the head start carries a
   * change to deliver, while the full list of a warm instance mostly confirms what head starts
   * published. On a busy node the list's work would otherwise delay the change.
   */
  async function giveWay(): Promise<void> {
    for (let i = 0; i < GIVE_WAY && headStarts.busy; i++) await headStarts.idle();
  }

  /**
   * The full pass behind head starts that served their events waits for more events: confirmDelayMs
   * after the last of them, and at most CONFIRM_WAIT_FACTOR times that after the first. During a
   * rollout one list then confirms many events, and its work (a list of every object, a render)
   * stays out of the way of the changes on their way to the agents. An event whose change is not
   * served yet never waits.
   */
  const confirmation = new Settled<PassInput["trigger"], ReconcileResult>(
    settings.confirmDelayMs,
    CONFIRM_WAIT_FACTOR,
    (trigger) => coalesced(trigger, "relevant"),
  );

  /** An event's pass after its head start: the result says published when the head start published what the pass confirms. */
  async function withHeadStart(trigger: { id: string; type: string }, refs: readonly ObjectRef[]) {
    underway++;
    tellBusy();
    try {
      return await headStartThenPass(trigger, refs);
    } finally {
      underway--;
      tellBusy();
    }
  }

  /**
   * Busy: a full pass runs or waits, or an event's head start or the confirmation behind it is under
   * way, which ends in a pass too. An event that arrives meanwhile joins (`join`).
   */
  let underway = 0;
  let saidBusy = false;
  const busyListeners: Array<(busy: boolean) => void> = [];
  const busy = () => underway > 0 || passQueue.busy;
  function tellBusy(): void {
    if (busy() === saidBusy) return;
    saidBusy = !saidBusy;
    for (const listener of busyListeners) listener(saidBusy);
  }
  passQueue.onBusy(tellBusy);

  async function headStartThenPass(trigger: { id: string; type: string }, refs: readonly ObjectRef[]) {
    const early = refs.length > 0 ? await headStartSoon(refs) : undefined;
    const served = early?.status === "published" || early?.status === "unchanged";
    const result = await (served ? confirmation.request(trigger) : coalesced(trigger, "relevant"));
    if (!early) return result;
    const confirmed = result.status === "unchanged" && early.status === "published" && early.key === result.key;
    return {
      ...result,
      eventId: trigger.id,
      eventType: trigger.type,
      headStart: early,
      ...(confirmed ? { status: "published" as const, notify: early.notify } : {}),
    };
  }

  /**
   * Classifies an event; `joining` says whether it joins the next pass (`join`) when it may change
   * the config, or runs as the delivery's own. What cannot change the config is acknowledged.
   */
  function take(
    event: unknown,
    joining: (verdict: "relevant" | "resync") => boolean,
  ): ReconcileResult | Promise<ReconcileResult> {
    const c = classifyEvent(event, settings.options);
    trace("event", {
      rv: (event as { data?: { metadata?: { resourceVersion?: unknown } } })?.data?.metadata?.resourceVersion,
      verdict: c.verdict,
      busy: busy(),
    });
    const id = c.id ?? "(none)";
    const type = c.type ?? "(none)";
    if ((c.verdict === "resync" || c.verdict === "relevant") && joining(c.verdict))
      return join({ id, type }, c.verdict, c.verdict === "relevant" ? refOf(c.object) : []);
    if (c.verdict === "resync") return coalesced({ id, type }, c.verdict);
    if (c.verdict === "relevant") return withHeadStart({ id, type }, refOf(c.object));
    const fields = {
      eventId: id,
      eventType: type,
      source: c.source,
      object: c.object,
      verdict: c.verdict,
      reason: c.reason,
    };
    // Acknowledged either way: retrying a poison event cannot help, and the resync covers it.
    if (c.verdict === "irrelevant") log.debug(fields, "event ignored: it cannot change the config");
    else log.warn(fields, "event ignored: not understood");
    return { eventId: id, eventType: type, verdict: c.verdict, status: "ignored", reason: c.reason };
  }

  return {
    reconcile: async (event) => take(event, busy),
    join: (event) => {
      void take(event, () => true);
    },
    onBusy: (listener) => {
      busyListeners.push(listener);
    },
    reconcileNow: (trigger) => coalesced(trigger, "resync"),
    async idle() {
      while (joined.size > 0) await Promise.all(joined);
      await gatewayStatus.idle();
    },
    close: () => {
      clearTimeout(retryTimer);
      return gatewayStatus
        .idle()
        .then(() => recording)
        .then(() => store.close());
    },
  };
}

/**
 * The object an event named, when a head start can read it: a Service or an EndpointSlice with
 * names the API server could hold (they go into a request path).
 */
function refOf(object: EventObject | undefined): ObjectRef[] {
  if (!object?.namespace || !DNS1123_LABEL.test(object.namespace)) return [];
  const { kind, namespace, name } = object;
  if (kind === "Service" && DNS1035_LABEL.test(name)) return [{ kind, namespace, name }];
  if (kind === "EndpointSlice" && name.length <= 253 && DNS1123_SUBDOMAIN.test(name))
    return [{ kind, namespace, name }];
  return [];
}

/**
 * The CloudEvent function. It answers with an empty body (204): the Broker treats a non-empty
 * reply that is not a CloudEvent as a failed delivery. A thrown error answers 500.
 */
export function createReconcileHandler(reconciler: Reconciler): (event: CloudEvent<unknown>) => Promise<void> {
  return async (event) => {
    await reconciler.reconcile(event);
  };
}
