/*
 * A warm instance's cache between renders of live snapshots (build-model.ts): the plan of every
 * Service kept by the versions it was made from, the last lists with their endpoint index, and the
 * last model, so that a pass where a few objects changed plans only their Services again and, when
 * their claims stayed the same, swaps their backends into the last model instead of settling
 * every claim again. Pure: it only decides what of the last pass still stands.
 */

import type { EndpointIndex, EndpointSource } from "../kubernetes/endpoints.js";
import type { Model } from "./model.js";
import type { RenderOptions } from "../settings/options.js";
import { compareIds, type PlanContext, planService, readyCount, type ServicePlan } from "./service-plan.js";
import type { Snapshot } from "../kubernetes/snapshot.js";
import type { EndpointSlice, Endpoints, Service } from "../kubernetes/snapshot-schemas.js";
import { SweptMap } from "./swept-map.js";

/**
 * What a warm instance remembers between renders of live snapshots (`Snapshot.trustedRevisions`;
 * a hand-edited file keeps stale versions): the plan of every Service, keyed by the Service's and
 * its endpoint objects' resourceVersions, which the API server changes on every write; and the
 * last model, so a render where only endpoints moved skips the settlement over all Services.
 * One cache serves one set of options.
 */
export class ModelCache {
  /** Plans by namespace and name; a full pass forgets the Services it no longer lists. */
  readonly plans = new SweptMap<CachedPlan>();
  /** Counts full passes (a warm pass over replaced objects only does not start one). */
  get generation(): number {
    return this.plans.generation;
  }
  get size(): number {
    return this.plans.size;
  }
  last: AssembledModel | undefined;
  /** What each plan claims (see `claims`), computed once per plan. */
  readonly claims = new WeakMap<ServicePlan, string>();
  /** The last pass's lists and the endpoint index over them, kept up to date by the objects that change. */
  lists: LastLists | undefined;
}

interface LastLists {
  options: RenderOptions;
  services: readonly Service[];
  endpointSlices: readonly EndpointSlice[];
  endpoints: readonly Endpoints[];
  index: EndpointIndex;
  /** The plan of each Service of `services`, when they were planned in list order (unfiltered, sorted already). */
  plans: ServicePlan[] | null;
}

/** More changed objects than this in one list, and a warm pass looks at every Service again. */
const MOST_CHANGED = 64;

/**
 * Positions where a list holds other objects than the last one did, or null when it is not the
 * same list with a few objects replaced. A live list of a warm instance hands out the very objects
 * of the last list for what did not change (ParsedItems), so this compares references only.
 */
function replacedAt<T>(before: readonly T[], after: readonly T[]): number[] | null {
  if (before.length !== after.length) return null;
  const at: number[] = [];
  for (let i = 0; i < after.length; i++) if (before[i] !== after[i] && at.push(i) > MOST_CHANGED) return null;
  return at;
}

/**
 * The Services a warm pass must plan again, by position in `services`, when the snapshot is the
 * last one with a few objects replaced (the same Services, in the same order); null otherwise.
 * The endpoint index is brought up to date on the way.
 */
export function changedServices(
  lists: LastLists | undefined,
  snapshot: Snapshot,
  options: RenderOptions,
): number[] | null {
  if (!lists || lists.options !== options || lists.plans === null) return null;
  const services = replacedAt(lists.services, snapshot.services);
  const slices = replacedAt(lists.endpointSlices, snapshot.endpointSlices);
  const endpoints = replacedAt(lists.endpoints, snapshot.endpoints);
  if (!services || !slices || !endpoints) return null;
  for (const i of services) {
    const before = lists.services[i]!.metadata;
    const now = snapshot.services[i]!.metadata;
    if (before.namespace !== now.namespace || before.name !== now.name) return null;
  }
  const owners: Array<[string, string]> = [];
  for (const i of slices)
    owners.push(...lists.index.replaceSlice(lists.endpointSlices[i]!, snapshot.endpointSlices[i]!));
  for (const i of endpoints) owners.push(...lists.index.replaceEndpoints(lists.endpoints[i]!, snapshot.endpoints[i]!));
  const at = new Set(services);
  for (const [namespace, name] of owners) {
    const i = positionOf(snapshot.services, namespace, name);
    if (i >= 0) at.add(i);
  }
  return [...at];
}

/** Position of a Service in a list sorted by namespace/name, or -1. */
function positionOf(services: readonly Service[], namespace: string, name: string): number {
  let lo = 0;
  let hi = services.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const m = services[mid]!.metadata;
    const d = compareIds(m.namespace, m.name, namespace, name);
    if (d === 0) return mid;
    if (d < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

interface CachedPlan {
  /** The Service's resourceVersion, then name and resourceVersion of each endpoint object. */
  versions: string[];
  plan: ServicePlan;
}

/** A model with what it was assembled from. */
interface AssembledModel {
  plans: ServicePlan[];
  model: Model;
  /** The snapshot had items that were not understood: they are warnings of the model, so it is settled again. */
  problems: boolean;
  options: RenderOptions;
  /** The --error-page body it was assembled with. */
  errorPageBody: string | undefined;
  /** Position of each backend in `model.backends`, by name. */
  positions: Map<string, number>;
}

/** The versions a plan depends on, or null when one is missing: a cache may only trust versions it can see. */
function versionsOf(svc: Service, source: EndpointSource): string[] | null {
  const own = svc.metadata.resourceVersion;
  if (!own) return null;
  if (Array.isArray(source)) {
    const versions = [own];
    for (const { metadata } of source as EndpointSlice[]) {
      if (!metadata.resourceVersion) return null;
      versions.push(metadata.name, metadata.resourceVersion);
    }
    return versions;
  }
  if (!source) return [own];
  // "" stands for the Endpoints object's name: slice names are never empty.
  const rv = (source as Endpoints).metadata.resourceVersion;
  return rv ? [own, "", rv] : null;
}

/** Whether a Service and its endpoint objects still have the versions a plan was made from. Allocates nothing. */
function sameVersions(versions: string[], svc: Service, source: EndpointSource): boolean {
  if (versions[0] !== svc.metadata.resourceVersion) return false;
  if (Array.isArray(source)) {
    const slices = source as EndpointSlice[];
    if (versions.length !== 1 + 2 * slices.length) return false;
    for (let i = 0; i < slices.length; i++) {
      const m = slices[i]!.metadata;
      if (versions[1 + 2 * i] !== m.name || versions[2 + 2 * i] !== m.resourceVersion) return false;
    }
    return true;
  }
  if (source)
    return (
      versions.length === 3 && versions[1] === "" && versions[2] === (source as Endpoints).metadata.resourceVersion
    );
  return versions.length === 1;
}

/**
 * What of a plan the settlement between Services reads: its skips, warnings, and for every port
 * the names and routes it claims. Two plans with the same claims settle the same way.
 */
function claims(plan: ServicePlan, memo: WeakMap<ServicePlan, string>): string {
  let c = memo.get(plan);
  if (c === undefined) {
    c = JSON.stringify([
      plan.skipped,
      plan.warnings,
      plan.created,
      plan.ports.map((p) => [
        p.tcp,
        p.backend.name,
        p.backend.servicePort,
        p.action,
        p.backend.settings.sslRedirect,
        p.backend.settings.timeoutClient,
        p.defaultPrefix,
        p.host,
        p.aclMatch,
      ]),
    ]);
    memo.set(plan, c);
  }
  return c;
}

/**
 * The last model with the backends of changed plans swapped in, when every changed plan claims
 * exactly what its predecessor claimed (endpoints moved; the usual change): routes, TCP frontends,
 * warnings and skips are then the same, and so is each backend's place and settled prefix.
 * Null when anything else changed; the caller settles everything again.
 */
export function reassemble(
  cache: ModelCache,
  plans: ServicePlan[],
  snapshot: Snapshot,
  options: RenderOptions,
  errorPageBody: string | undefined,
): Model | null {
  const last = cache.last;
  if (!last || last.options !== options || last.errorPageBody !== errorPageBody) return null;
  if (last.plans.length !== plans.length || snapshot.problems.length > 0 || last.problems) return null;
  const changed: Array<[ServicePlan, ServicePlan]> = [];
  for (let i = 0; i < plans.length; i++) {
    const before = last.plans[i]!;
    const now = plans[i]!;
    if (before === now) continue;
    if (before.id !== now.id || claims(before, cache.claims) !== claims(now, cache.claims)) return null;
    changed.push([before, now]);
  }
  if (changed.length === 0 && last.model.revision === snapshot.revision) return last.model;
  const backends = last.model.backends.slice();
  let readyServers = last.model.readyServers;
  for (const [before, now] of changed) {
    now.ports.forEach((p, i) => {
      const at = last.positions.get(p.backend.name);
      const old = before.ports[i]!;
      if (at === undefined || backends[at] !== (old.settled?.backend ?? old.backend)) return;
      readyServers += readyCount(p.backend) - readyCount(backends[at]!);
      if (p.tcp) {
        backends[at] = p.backend;
      } else {
        const settledBackend = backends[at]!.strip ? { ...p.backend, strip: backends[at]!.strip } : p.backend;
        p.settled = { stripKey: old.settled!.stripKey, backend: settledBackend };
        backends[at] = settledBackend;
      }
    });
  }
  const model: Model = { ...last.model, revision: snapshot.revision, backends, readyServers };
  last.plans = plans;
  last.model = model;
  return model;
}

/**
 * The plan of a Service, from the cache while the Service and its endpoint objects keep the
 * versions it was made from; the Service is marked seen by this pass either way.
 */
export function planCached(cache: ModelCache, svc: Service, index: EndpointIndex, context: PlanContext): ServicePlan {
  const { namespace, name } = svc.metadata;
  const source = index.sourceOf(svc);
  const entry = cache.plans.get(namespace, name);
  if (entry && sameVersions(entry.versions, svc, source)) {
    cache.plans.touch(namespace, name);
    return entry.plan;
  }
  const plan = planService(svc, context);
  const versions = versionsOf(svc, source);
  if (versions === null) cache.plans.delete(namespace, name);
  else cache.plans.set(namespace, name, { versions, plan });
  return plan;
}

/** Keeps a model assembled afresh as the one the next pass may reassemble from; returns it. */
export function rememberModel(
  cache: ModelCache,
  plans: ServicePlan[],
  snapshot: Snapshot,
  options: RenderOptions,
  errorPageBody: string | undefined,
  model: Model,
): Model {
  const positions = new Map<string, number>();
  for (const [i, b] of model.backends.entries()) positions.set(b.name, i);
  cache.last = { plans, model, problems: snapshot.problems.length > 0, options, errorPageBody, positions };
  return model;
}

/**
 * Keeps this pass's lists and endpoint index for the next; `plans` when the Services were planned
 * in list order (unfiltered, sorted already), else null.
 */
export function rememberLists(
  cache: ModelCache,
  snapshot: Snapshot,
  options: RenderOptions,
  index: EndpointIndex,
  plans: ServicePlan[] | null,
): void {
  cache.lists = {
    options,
    services: snapshot.services,
    endpointSlices: snapshot.endpointSlices,
    endpoints: snapshot.endpoints,
    index,
    plans,
  };
}
