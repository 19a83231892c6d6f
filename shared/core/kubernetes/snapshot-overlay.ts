/*
 * A warm instance's head start: the snapshot of its last full list with the objects an event named,
 * read again from the API server, laid over it (app/head-start.ts). Pure: what was read comes from
 * the caller. Its revision is the highest of the base's and the objects read: the newest change it
 * holds. So a list older than that change, another instance's finishing late, cannot publish over
 * it and take the change back; the full list that follows a head start, which starts after the
 * change, publishes at or past it. (An object read as gone carries no revision.)
 *
 * A read object older than the base's copy of it (a list answered after the read) is not laid
 * over it.
 *
 * Unchanged objects keep their place and identity, and a replaced one takes the place of the one
 * it replaces, so a warm build sees the lists it saw with a few objects replaced (model-cache.ts);
 * new ones are appended, and the build puts them in order.
 */

import { SERVICE_NAME_LABEL } from "./k8s-names.js";
import { compareRevisions, decimalRevision, newerRevision } from "../publish/revision.js";
import type { Snapshot } from "./snapshot.js";
import type { EndpointSlice, Service } from "./snapshot-schemas.js";

export interface ObjectRead<T> {
  namespace: string;
  name: string;
  /** null: the API server no longer has it, or it is out of scope (the --selector). */
  item: T | null;
}

export interface FreshReads {
  services: Array<ObjectRead<Service>>;
  endpointSlices: Array<ObjectRead<EndpointSlice>>;
  /** Every EndpointSlice of a Service, read by its label: they replace all the slices the base had for it. */
  slicesOf: Array<{ namespace: string; service: string; items: EndpointSlice[] }>;
  /** Objects read that did not validate: left out, as a list would leave them out. */
  problems: string[];
}

/** By namespace, then name: a pass over 10,000 objects builds no key strings. */
type ByName<V> = Map<string, Map<string, V>>;

function byName<V>(entries: Iterable<readonly [string, string, V]>): ByName<V> {
  const out: ByName<V> = new Map();
  for (const [namespace, name, value] of entries) {
    const inNamespace = out.get(namespace) ?? new Map<string, V>();
    if (inNamespace.size === 0) out.set(namespace, inNamespace);
    inNamespace.set(name, value);
  }
  return out;
}

export function overlaySnapshot(base: Snapshot, fresh: FreshReads): Snapshot {
  const services = overlay(
    base.services,
    byName(fresh.services.map((r) => [r.namespace, r.name, r.item] as const)),
    () => false,
  );
  const replacedSlices = byName<EndpointSlice | null>([
    ...fresh.endpointSlices.map((r) => [r.namespace, r.name, r.item] as const),
    ...fresh.slicesOf.flatMap((s) => s.items.map((slice) => [s.namespace, slice.metadata.name, slice] as const)),
  ]);
  const owners = byName(fresh.slicesOf.map((s) => [s.namespace, s.service, true] as const));
  const ownedByRead = (slice: EndpointSlice) => {
    const owner = slice.metadata.labels[SERVICE_NAME_LABEL];
    return owner !== undefined && owners.get(slice.metadata.namespace)?.has(owner) === true;
  };
  const endpointSlices = overlay(base.endpointSlices, replacedSlices, ownedByRead);
  return {
    ...base,
    services,
    endpointSlices,
    revision: newerRevision(base.revision, readRevision(fresh)),
    // Read again and again, an object that does not validate is one problem, not one per read.
    problems: fresh.problems.length > 0 ? [...new Set([...base.problems, ...fresh.problems])] : base.problems,
  };
}

/** The highest resourceVersion among the objects read ("0" when none is decimal). */
export function readRevision(fresh: FreshReads): string {
  let highest = "0";
  const see = (rv: string | undefined) => {
    if (decimalRevision(rv) !== null) highest = newerRevision(highest, decimalRevision(rv)!);
  };
  for (const r of fresh.services) see(r.item?.metadata.resourceVersion);
  for (const r of fresh.endpointSlices) see(r.item?.metadata.resourceVersion);
  for (const s of fresh.slicesOf) for (const slice of s.items) see(slice.metadata.resourceVersion);
  return highest;
}

/** Whether `fresh` is an older version of the object than `held` (both decimal resourceVersions). */
function older(fresh: { metadata: { resourceVersion?: string } }, held: { metadata: { resourceVersion?: string } }) {
  const a = decimalRevision(fresh.metadata.resourceVersion);
  const b = decimalRevision(held.metadata.resourceVersion);
  return a !== null && b !== null && compareRevisions(a, b) < 0;
}

/**
 * The base list with each object named in `replaced` swapped in place (or dropped, for null), the
 * objects `dropped` says go away left out, and the named objects the base lacked appended.
 */
function overlay<T extends { metadata: { namespace: string; name: string; resourceVersion?: string } }>(
  base: readonly T[],
  replaced: ByName<T | null>,
  dropped: (item: T) => boolean,
): T[] {
  const placed = new Set<T | null>();
  const out: T[] = [];
  for (const item of base) {
    const inNamespace = replaced.get(item.metadata.namespace);
    if (inNamespace?.has(item.metadata.name)) {
      const fresh = inNamespace.get(item.metadata.name)!;
      placed.add(fresh);
      if (fresh) out.push(older(fresh, item) ? item : fresh);
    } else if (!dropped(item)) out.push(item);
  }
  for (const inNamespace of replaced.values())
    for (const fresh of inNamespace.values()) if (fresh && !placed.has(fresh)) out.push(fresh);
  return out;
}
