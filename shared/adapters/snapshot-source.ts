import { formatLabelSelector } from "../core/label-selector.js";
import type { RenderOptions } from "../core/options.js";
import { snapshotFromDocuments, type ParsedItems, type Snapshot } from "../core/snapshot.js";
import { listCluster, loadKubeConfig } from "./cluster.js";

export interface KubeAccess {
  kubeconfig?: string;
  context?: string;
  timeoutMs?: number;
}

/**
 * A snapshot of the live cluster, scoped by the same options the render applies. A warm instance
 * passes the items it validated before (`reuse`): unchanged ones are not validated again.
 */
export async function readLiveSnapshot(options: Pick<RenderOptions, "namespace" | "selector">, access: KubeAccess, reuse?: ParsedItems): Promise<Snapshot & { listWarnings: string[] }> {
  const kc = loadKubeConfig({ kubeconfig: access.kubeconfig, context: access.context });
  const live = await listCluster(kc, {
    namespace: options.namespace,
    labelSelector: options.selector && options.selector.length > 0 ? formatLabelSelector(options.selector) : undefined,
    timeoutMs: access.timeoutMs,
  });
  const snapshot = snapshotFromDocuments([live.list], reuse);
  return { ...snapshot, revision: live.revision, trustedRevisions: true, listWarnings: live.warnings };
}
