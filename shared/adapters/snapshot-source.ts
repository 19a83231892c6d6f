import { formatLabelSelector } from "../core/label-selector.js";
import type { RenderOptions } from "../core/options.js";
import { snapshotFromItems, validateItem, type ParsedItems, type Snapshot } from "../core/snapshot.js";
import { listClusterItems, loadKubeConfig } from "./cluster.js";

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
): Promise<Snapshot & { listWarnings: string[] }> {
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
  return { ...snapshotFromItems(live.items, [live.revision]), trustedRevisions: true, listWarnings: live.warnings };
}
