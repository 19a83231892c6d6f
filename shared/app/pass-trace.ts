/*
 * The stage trace of a reconcile instance (adapters/stage-trace.ts; bench/e2e, bench/scale and
 * bench/storm read it) as two decorators an entry point wraps around what it wires: one around
 * the steps of every run (`traceSteps`), one around the reconciler's intake of events
 * (`traceEvents`). The pass itself knows nothing of tracing.
 *
 * Events, each with the run's number `n` and `step: "head-start"` for a head start: pass.start
 * (its first step: the read of a head start, the list of a full pass), pass.read, pass.listed,
 * pass.turn (a head start's turn to render), pass.rendered, pass.published, pass.notified, and
 * pass.end (a full pass that published and pinged, or found nothing to publish).
 */

import type { StageTrace } from "../adapters/stage-trace.js";
import { readRevision } from "../core/kubernetes/snapshot-overlay.js";
import { classifyEvent, type ScopeOptions } from "./cloudevents.js";
import type { PassSteps, RunTag } from "./pass-steps.js";
import type { FunctionSettings } from "./function-options.js";
import { createReconciler, type ReconcileDeps, type Reconciler } from "./reconcile.js";

/** createReconciler with the trace wrapped around its steps and its intake of events. */
export function tracedReconciler(settings: FunctionSettings, deps: ReconcileDeps, trace: StageTrace): Reconciler {
  const steps = deps.decorate;
  const reconciler = createReconciler(settings, {
    ...deps,
    decorate: (wired) => traceSteps(steps ? steps(wired) : wired, trace),
  });
  return traceEvents(reconciler, trace, settings.options);
}

/** Runs whose pass.start is traced, kept for so many runs at most (a run that ends early leaves its number). */
const STARTED_KEPT = 256;

export function traceSteps(steps: PassSteps, trace: StageTrace): PassSteps {
  const started = new Set<number>();
  const tag = (run: RunTag) => (run.headStart ? { n: run.n, step: "head-start" } : { n: run.n });
  const start = (run: RunTag) => {
    if (started.has(run.n)) return;
    started.add(run.n);
    if (started.size > STARTED_KEPT) started.delete(started.values().next().value!);
    trace("pass.start", tag(run));
  };
  const end = (run: RunTag) => {
    started.delete(run.n);
    if (!run.headStart) trace("pass.end", { n: run.n });
  };
  return {
    async list(run, signal) {
      start(run);
      const listed = await steps.list(run, signal);
      trace("pass.listed", { n: run.n, revision: listed.revision });
      return listed;
    },
    async read(run, refs, signal) {
      start(run);
      const fresh = await steps.read(run, refs, signal);
      trace("pass.read", { n: run.n, revision: readRevision(fresh) });
      return fresh;
    },
    render(run, snapshot) {
      if (run.headStart) trace("pass.turn", { n: run.n });
      const rendered = steps.render(run, snapshot);
      trace("pass.rendered", { ...tag(run), buildMs: rendered.stats.buildMs, renderMs: rendered.stats.renderMs });
      return rendered;
    },
    async publish(run, input) {
      const published = await steps.publish(run, input);
      trace("pass.published", { ...tag(run), status: published.status, key: published.key });
      if (published.status === "unchanged" || published.status === "stale") end(run);
      return published;
    },
    async notify(run, payload) {
      const report = await steps.notify(run, payload);
      trace("pass.notified", tag(run));
      end(run);
      return report;
    },
  };
}

/**
 * Traces each event as it arrives ("event": the object's resourceVersion, the verdict, and whether
 * a pass was under way, so that it joins the next), then hands it on.
 */
export function traceEvents(reconciler: Reconciler, trace: StageTrace, scope: ScopeOptions): Reconciler {
  let busy = false;
  reconciler.onBusy((now) => {
    busy = now;
  });
  const arrived = (event: unknown) =>
    trace("event", {
      rv: (event as { data?: { metadata?: { resourceVersion?: unknown } } })?.data?.metadata?.resourceVersion,
      verdict: classifyEvent(event, scope).verdict,
      busy,
    });
  return {
    reconcile(event) {
      arrived(event);
      return reconciler.reconcile(event);
    },
    join(event) {
      arrived(event);
      reconciler.join(event);
    },
    onBusy: (listener) => reconciler.onBusy(listener),
    reconcileNow: (trigger) => reconciler.reconcileNow(trigger),
    idle: () => reconciler.idle(),
    close: () => reconciler.close(),
  };
}
