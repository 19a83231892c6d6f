/*
 * The reconcile function's use case (docs/design.md#the-pipeline, steps 1-5): an event in, a full
 * pass (app/pass.ts) run for it, after a head start (app/head-start.ts) where a warm instance
 * can take one, when the workqueue (app/pass-queue.ts) says. This module wires the parts. Stateless
 * apart from what a warm instance caches (templates, clients, its last list): the object store
 * decides what is newest, so two instances may run side by side.
 */

import type { CloudEvent } from "@google-cloud/functions-framework";
import { envName, OptionsError } from "../core/settings/settings.js";
import { settingsRecord } from "../core/settings/settings-record.js";
import { LiveView } from "../core/kubernetes/live-view.js";
import type { FreshReads } from "../core/kubernetes/snapshot-overlay.js";
import { readClusterRevision, type ObjectRef } from "../adapters/cluster.js";
import { loadKubeConfig } from "../adapters/kube-config.js";
import type { Logger } from "../adapters/log.js";
import { createNotifier, type Notifier } from "../adapters/notifier.js";
import type { ObjectStore } from "../adapters/store.js";
import { readFreshObjects, readLiveSnapshot } from "../adapters/snapshot-source.js";
import { packageVersion } from "../adapters/package-version.js";
import { openStore } from "../adapters/open-store.js";
import { classifyEvent } from "./cloudevents.js";
import { requireStore, type FunctionSettings } from "./function-options.js";
import { RenderContext } from "./render-context.js";
import { AgentReports } from "./agent-reports.js";
import { HEAD_START_READ_TIMEOUT_MS, refOf, runHeadStart } from "./head-start.js";
import { runPass, type ReconcileResult } from "./pass.js";
import { ReconcileQueue } from "./pass-queue.js";
import { PassRecorder } from "./pass-record.js";
import { createRolloutGates } from "./rollout-gates.js";
import { gatewayStatusUpdater } from "./gateway-status.js";
import type { LiveSnapshot, PassSteps } from "./pass-steps.js";
import { type Instance, Turns, type WarmState } from "./warm-instance.js";

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
  /** How often a warm instance reads the agents' reports again to choose the digest. Default DIGEST_RECHECK_MS. */
  digestRecheckMs?: number;
  /** Wraps the steps of every run once they are wired (the stage trace of bench/e2e: app/pass-trace.ts). */
  decorate?: (steps: PassSteps) => PassSteps;
}

export interface Reconciler {
  /** Classifies a CloudEvent and, when it may change the config, runs a full pass. */
  reconcile(event: unknown): Promise<ReconcileResult>;
  /**
   * Takes an event that joins the next pass whatever runs now (ReconcileQueue.join), answered by its caller
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

export function createReconciler(settings: FunctionSettings, deps: ReconcileDeps): Reconciler {
  const log = deps.log;
  const store = deps.store ?? openStore(requireStore(settings));
  const notifier = deps.notifier ?? createNotifier(notifierOptions(settings), log);
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
  const steps: PassSteps = {
    list: (_run, signal) => readSnapshot(signal),
    read: (_run, refs, signal) => readObjects(refs, signal),
    render: (_run, snapshot) => ctx.render(snapshot),
    publish: (_run, input) => store.publish(input),
    notify: (_run, payload) => notifier.notify(payload),
  };
  const generator = deps.generator ?? `servicelb/${packageVersion()}`;
  checkAgents(settings, log);

  let runs = 0;
  const instance: Instance = {
    log,
    settings,
    steps: deps.decorate ? deps.decorate(steps) : steps,
    ctx,
    reports: new AgentReports(
      settings.digest,
      () => store.readStatuses(),
      async () => {
        const found = await notifier.discover();
        return found.error ? undefined : found.agents.length;
      },
      log,
      deps.digestRecheckMs,
    ),
    rollouts: createRolloutGates(store, settings.canary ?? null, log),
    gatewayStatus: gatewayStatusUpdater(kube, () => store.readStatuses(), log),
    store,
    liveRevision:
      deps.liveRevision ??
      ((signal) => readClusterRevision(loadKubeConfig(kube), { namespace: settings.options.namespace, signal })),
    generator,
    recorded: settingsRecord(settings.options, ctx.template),
    recorder: new PassRecorder(store, generator, log),
    turns: new Turns(),
    nextRun: () => ++runs,
  };
  const state: WarmState = {
    view: new LiveView<LiveSnapshot>(),
    renderedServices: undefined,
    newest: undefined,
    pruneDue: false,
  };
  const queue: ReconcileQueue = new ReconcileQueue(
    {
      pass: (trigger, verdict) => runPass(instance, state, trigger, verdict, () => queue.giveWay()),
      headStart: (refs) => runHeadStart(instance, state, refs),
    },
    settings.confirmDelayMs,
    log,
  );

  /**
   * Classifies an event; `joining` says whether it joins the next pass (`Reconciler.join`) when
   * it may change the config, or runs as the delivery's own. What cannot change the config is
   * acknowledged.
   */
  function take(
    event: unknown,
    joining: (verdict: "relevant" | "resync") => boolean,
  ): ReconcileResult | Promise<ReconcileResult> {
    const c = classifyEvent(event, settings.options);
    const trigger = { id: c.id ?? "(none)", type: c.type ?? "(none)" };
    if ((c.verdict === "resync" || c.verdict === "relevant") && joining(c.verdict))
      return queue.join(trigger, c.verdict, c.verdict === "relevant" ? refOf(c.object) : []);
    if (c.verdict === "resync") return queue.pass(trigger, c.verdict);
    if (c.verdict === "relevant") return queue.withHeadStart(trigger, refOf(c.object));
    const fields = {
      eventId: trigger.id,
      eventType: trigger.type,
      source: c.source,
      object: c.object,
      verdict: c.verdict,
      reason: c.reason,
    };
    // Acknowledged either way: retrying a poison event cannot help, and the resync covers it.
    if (c.verdict === "irrelevant") log.debug(fields, "event ignored: it cannot change the config");
    else log.warn(fields, "event ignored: not understood");
    return { eventId: trigger.id, eventType: trigger.type, verdict: c.verdict, status: "ignored", reason: c.reason };
  }

  return {
    reconcile: async (event) => take(event, () => queue.busy),
    join: (event) => {
      void take(event, () => true);
    },
    onBusy: (listener) => queue.onBusy(listener),
    reconcileNow: (trigger) => queue.pass(trigger, "resync"),
    idle: async () => {
      await queue.idle();
      await instance.gatewayStatus.idle();
    },
    close: () => {
      queue.close();
      return instance.gatewayStatus
        .idle()
        .then(() => instance.recorder.written())
        .then(() => store.close());
    },
  };
}

function notifierOptions(settings: FunctionSettings) {
  return {
    agents: settings.notify.agents,
    agentService: settings.notify.agentService,
    agentPort: settings.notify.agentPort,
    kube: { kubeconfig: settings.kubeconfig, context: settings.context },
    token: settings.notify.token,
    tokenFile: settings.notify.tokenFile,
    timeoutMs: settings.notify.timeoutMs,
    concurrency: settings.notify.concurrency,
    deadlineMs: settings.notify.deadlineMs,
  };
}

function checkAgents(settings: FunctionSettings, log: Logger): void {
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
