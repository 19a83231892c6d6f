/*
 * A warm instance's head start: the objects the events named, read again from the API server and
 * laid over its last list (core/kubernetes/live-view.ts, core/kubernetes/snapshot-overlay.ts), rendered and published,
 * so that a change reaches the agents without waiting for a list of the whole cluster. The full
 * pass follows in the same delivery whatever happened here (app/pass-queue.ts): it is what makes
 * the pass level-triggered.
 */

import type { ObjectRef } from "../adapters/cluster.js";
import type { PublishResult } from "../adapters/store.js";
import { DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN } from "../core/kubernetes/k8s-names.js";
import { msSince } from "../core/render/milliseconds.js";
import { holdPendingServices, serviceKey } from "../core/kubernetes/pending-services.js";
import type { EventObject } from "./cloudevents.js";
import type { NotifyCounts, RunTag } from "./pass-steps.js";
import { type Instance, runDeadline, type WarmState } from "./warm-instance.js";
import { errorMessage } from "../core/error-message.js";

/** What a head start did, before its event's full pass. */
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
  notify?: NotifyCounts;
  ms: number;
}

/** Why a head start rendered nothing: every object it read was a new Service held back. */
export const HELD_ONLY = "every object read is a new Service waiting for its EndpointSlices: nothing to render";
/** More objects than this named by the events one head start would read, and the pass only lists. */
const MOST_HINTED = 32;
/**
 * Per read of a head start: a read is a small GET, and the event's full pass waits for its head
 * start, so a throttled API server must not hold it for the list's 30 s.
 */
export const HEAD_START_READ_TIMEOUT_MS = 2000;

/**
 * A head start. It never fails the event's delivery: whatever goes wrong here, the full pass that
 * follows decides. It publishes at the view's revision, that of the newest object read
 * (core/kubernetes/snapshot-overlay.ts), and only over the newest config this instance last saw: never over
 * another instance's publish, and a list taken before the change it read cannot publish over it.
 */
export async function runHeadStart(at: Instance, state: WarmState, refs: readonly ObjectRef[]): Promise<HeadStart> {
  const t = performance.now();
  const done = (status: HeadStart["status"], more: Partial<HeadStart> = {}): HeadStart => ({
    status,
    objects: refs.length,
    ms: msSince(t),
    ...more,
  });
  const from = state.view.snapshot;
  if (!from || !state.renderedServices) return done("skipped", { reason: "no full list on this instance yet" });
  if (state.newest === undefined)
    return done("skipped", { reason: "another instance published since this instance's last list" });
  if (refs.length > MOST_HINTED) return done("skipped", { reason: `more than ${MOST_HINTED} objects changed` });
  if (from.endpointKind === "Endpoints" || from.endpoints.length > 0)
    return done("skipped", { reason: "the cluster serves v1 Endpoints, not EndpointSlices" });
  const run: RunTag = { n: at.nextRun(), headStart: true };
  const plog = at.log.child({ headStart: run.n });
  let stage = "read";
  const deadline = runDeadline(at.settings.passTimeoutMs, () => stage);
  try {
    const ticket = state.view.ticket();
    const fresh = await deadline.guard(at.steps.read(run, refs, deadline.signal));
    const report = await at.turns.take(async () => {
      const snapshot = state.view.read(ticket, fresh);
      const expected = state.newest;
      if (!snapshot || !state.renderedServices || expected === undefined)
        return done("skipped", { reason: "the view was reset meanwhile" });
      stage = "publish";
      const pending = at.settings.options.forwardServices
        ? { snapshot, held: [] }
        : holdPendingServices(snapshot, state.renderedServices);
      // A new Service's own event, before its slices: nothing it read is to be published, so
      // nothing is rendered, and the slices' head start (often queued behind it) waits less.
      // Whatever else the view holds that the newest config lacks (a publish that failed after
      // its list) came with an event of its own, whose pass publishes it.
      const named = refs.map((r) => `${r.namespace}/${r.name}`);
      if (refs.length > 0 && refs.every((r, i) => r.kind === "Service" && pending.held.includes(named[i]!)))
        return done("unchanged", { key: expected.key, held: named, reason: HELD_ONLY });
      // What the last read decided: a head start never waits for one.
      at.ctx.useDigest(at.reports.current);
      at.ctx.useRoom(at.reports.room);
      at.ctx.useCertificates(at.reports.certificates);
      const rendered = at.steps.render(run, pending.snapshot);
      // The bytes of the newest config this instance knows (a new Service held back beside objects
      // that changed nothing, an edit that renders nothing new): nothing to deliver, so no request to
      // the store that the next head start would wait behind. The full pass behind it records
      // the view, and settles what another instance may have published since
      // (docs/design.md#the-reconcile-function).
      if (rendered.sha256 === expected.sha256) return done("unchanged", { key: expected.key });
      const published = await deadline.guard(
        at.steps.publish(run, {
          config: rendered,
          revision: snapshot.revision,
          generator: at.generator,
          settings: at.recorded,
          ...(rendered.layout ? { layout: rendered.layout } : {}),
          liveRevision: () => deadline.guard(at.liveRevision(deadline.signal)),
          expectedNewest: expected.key,
        }),
      );
      if (published.status !== "published" && published.status !== "unchanged") {
        state.newest = undefined;
        return done(published.status, { key: published.key });
      }
      state.newest = published.newest;
      state.renderedServices = new Set(pending.snapshot.services.map(serviceKey));
      if (published.status === "unchanged") return done("unchanged", { key: published.key });
      if (published.pruneDue) state.pruneDue = true;
      stage = "notify";
      const pinged = await deadline.guard(
        at.steps.notify(run, { key: published.key, sha256: published.sha256, revision: snapshot.revision }),
      );
      return done("published", {
        key: published.key,
        notify: { agents: pinged.agents, ok: pinged.ok, failed: pinged.failed },
      });
    });
    if (report.status === "published") plog.info({ ...report }, "head start: published");
    return report;
  } catch (err) {
    plog.warn({ err, stage, refs: refs.length }, "head start failed; the full pass decides");
    return done("failed", { reason: errorMessage(err) });
  }
}

/**
 * The object an event named, when a head start can read it: a Service or an EndpointSlice with
 * names the API server could hold (they go into a request path).
 */
export function refOf(object: EventObject | undefined): ObjectRef[] {
  if (!object?.namespace || !DNS1123_LABEL.test(object.namespace)) return [];
  const { kind, namespace, name } = object;
  if (kind === "Service" && DNS1035_LABEL.test(name)) return [{ kind, namespace, name }];
  if (kind === "EndpointSlice" && name.length <= 253 && DNS1123_SUBDOMAIN.test(name))
    return [{ kind, namespace, name }];
  return [];
}
