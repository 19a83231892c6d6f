/*
 * Services whose endpoints are on their way. Kubernetes writes a new Service's EndpointSlice (a
 * placeholder when no pod matches its selector) right after the Service, so the Service's own
 * event is followed by its slice's. A pass for the first would publish a backend without
 * endpoints — a reload on every node — and the slice's pass would then wait behind it to publish
 * the endpoints. Held back from that pass, the Service arrives once, with its endpoints.
 *
 * Held: a Service with a selector, no EndpointSlice and no Endpoints, that the caller has never
 * rendered. A Service once rendered is never held (holding would take a served Service away), and
 * the caller holds nothing on a resync, so a slice that never comes delays a Service by at most
 * one resync period.
 */

import { SERVICE_NAME_LABEL } from "./k8s-names.js";
import type { Snapshot } from "./snapshot.js";

export function holdPendingServices(
  snapshot: Snapshot,
  rendered: ReadonlySet<string>,
): { snapshot: Snapshot; held: string[] } {
  // Mostly none: a warm pass looks at its slices only for a Service it has never rendered.
  const unrendered = snapshot.services.filter((svc) => hasSelector(svc) && !rendered.has(serviceKey(svc)));
  if (unrendered.length === 0) return { snapshot, held: [] };
  const withEndpoints = new Set<string>();
  for (const slice of snapshot.endpointSlices) {
    const owner = slice.metadata.labels[SERVICE_NAME_LABEL];
    if (owner) withEndpoints.add(`${slice.metadata.namespace}/${owner}`);
  }
  for (const e of snapshot.endpoints) withEndpoints.add(`${e.metadata.namespace}/${e.metadata.name}`);
  const pending = new Set(unrendered.filter((svc) => !withEndpoints.has(serviceKey(svc))));
  if (pending.size === 0) return { snapshot, held: [] };
  return {
    snapshot: { ...snapshot, services: snapshot.services.filter((svc) => !pending.has(svc)) },
    held: [...pending].map(serviceKey),
  };
}

function hasSelector(svc: Snapshot["services"][number]): boolean {
  for (const _ in svc.spec.selector ?? {}) return true;
  return false;
}

export function serviceKey(svc: Snapshot["services"][number]): string {
  return `${svc.metadata.namespace}/${svc.metadata.name}`;
}
