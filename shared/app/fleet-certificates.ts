/*
 * Which Gateway certificates the fleet holds, from the agents' reports (status/<node>.json,
 * `gatewayCertificates`): what a render binds HTTPS listeners with (core/gateway/certificates.ts).
 * Safety first, as for digests (agent-reports.ts): a report that cannot be parsed is a node that
 * holds nothing, and a read that misses some reports keeps what the last read said of the nodes
 * it missed.
 */

import { type NodeStatus, nodeStatusSchema } from "../agent/status-report.js";
import type { HeldCertificates } from "../core/gateway/certificates.js";

/** Before any read of the reports: nothing is known, nothing is bound. */
export const UNREAD: HeldCertificates = {
  holders: [],
  unknown: "the agents' reports have not been read yet",
};

/** The holders one read's reports name: each report's node, with the refs it lists. */
export function heldInReports(reports: readonly unknown[]): HeldCertificates["holders"] {
  return reports
    .map((report) => {
      const parsed = nodeStatusSchema.safeParse(report);
      const status: NodeStatus | null = parsed.success ? parsed.data : null;
      return status
        ? { name: `node ${status.node}`, certificates: status.gatewayCertificates }
        : { name: "a node whose report cannot be read", certificates: [] };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * What the fleet holds after a read: a whole read says it all; one that missed some reports
 * (`whole` false) updates the nodes it read and keeps the rest of `last`.
 */
export function fleetCertificates(
  last: HeldCertificates,
  reports: readonly unknown[],
  whole: boolean,
): HeldCertificates {
  const read = heldInReports(reports);
  if (whole) return { holders: read, unknown: "no node has reported to the store yet" };
  const names = new Set(read.map((h) => h.name));
  const holders = [...last.holders.filter((h) => !names.has(h.name)), ...read].sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  return { holders, unknown: last.unknown };
}
