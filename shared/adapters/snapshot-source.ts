import { formatLabelSelector, matchesSelector } from "../core/kubernetes/label-selector.js";
import type { RenderOptions } from "../core/settings/options.js";
import type { FreshReads } from "../core/kubernetes/snapshot-overlay.js";
import {
  snapshotFromItems,
  validateItem,
  type ParsedItems,
  type Snapshot,
  type ValidatedItem,
} from "../core/kubernetes/snapshot.js";
import { listClusterItems, readObjects, type ObjectRef } from "./cluster.js";
import { loadKubeConfig } from "./kube-config.js";

export interface KubeAccess {
  kubeconfig?: string;
  context?: string;
  timeoutMs?: number;
  /** Items per list request; the API server's default page is 500. */
  pageSize?: number;
  /** Ends the list (the pass's deadline). */
  signal?: AbortSignal;
}

/**
 * A snapshot of the live cluster, scoped by the same options the render applies. A warm instance
 * passes the items it validated before (`reuse`): unchanged ones are not validated again.
 */
export async function readLiveSnapshot(
  options: Pick<RenderOptions, "namespace" | "selector">,
  access: KubeAccess,
  reuse?: ParsedItems,
): Promise<Snapshot & { listWarnings: string[]; endpointKind: "EndpointSlice" | "Endpoints" }> {
  const kc = loadKubeConfig({ kubeconfig: access.kubeconfig, context: access.context });
  // Each item is validated as its page arrives: the raw pages are garbage long before the last one.
  reuse?.begin();
  const live = await listClusterItems(
    kc,
    {
      namespace: options.namespace,
      labelSelector:
        options.selector && options.selector.length > 0 ? formatLabelSelector(options.selector) : undefined,
      timeoutMs: access.timeoutMs,
      pageSize: access.pageSize,
      signal: access.signal,
    },
    (item) => validateItem(item, undefined, "live list", reuse),
  );
  reuse?.end();
  return {
    ...snapshotFromItems(live.items, [live.revision]),
    trustedRevisions: true,
    listWarnings: live.warnings,
    endpointKind: live.endpointKind,
  };
}

/**
 * The named objects as the API server has them now, validated as a list's items are and scoped by
 * the same --selector (a Service that stopped matching reads as gone), for a warm instance's head
 * start (core/kubernetes/snapshot-overlay.ts). An object that does not validate reads as gone, with its problem.
 */
export async function readFreshObjects(
  options: Pick<RenderOptions, "selector">,
  access: KubeAccess,
  refs: readonly ObjectRef[],
  reuse?: ParsedItems,
): Promise<FreshReads> {
  const kc = loadKubeConfig({ kubeconfig: access.kubeconfig, context: access.context });
  const reads = await readObjects(kc, refs, { timeoutMs: access.timeoutMs, signal: access.signal }, (item) =>
    validateItem(item, undefined, "read", reuse),
  );
  const fresh: FreshReads = { services: [], endpointSlices: [], slicesOf: [], problems: [] };
  const report = (v: ValidatedItem) => {
    if (v?.kind === "problem") fresh.problems.push(v.problem);
  };
  const selector = options.selector ?? [];
  for (const { ref, item } of reads.objects) {
    if (item) report(item);
    const at = { namespace: ref.namespace, name: ref.name };
    if (ref.kind === "Service") {
      const svc = item?.kind === "Service" && matchesSelector(selector, item.item.metadata.labels) ? item.item : null;
      fresh.services.push({ ...at, item: svc });
    } else fresh.endpointSlices.push({ ...at, item: item?.kind === "EndpointSlice" ? item.item : null });
  }
  for (const { namespace, service, items } of reads.slicesOf) {
    for (const v of items) report(v);
    fresh.slicesOf.push({
      namespace,
      service,
      items: items.flatMap((v) => (v?.kind === "EndpointSlice" ? [v.item] : [])),
    });
  }
  return fresh;
}
