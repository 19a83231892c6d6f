/*
 * The warnings of one render as Prometheus metrics (text exposition format), so that an alert can
 * fire when a Service loses a route it claims, or an object is refused, without reading logs.
 */

import { compareStrings } from "../core/compare.js";
import type { Warning } from "../core/model/model.js";
import type { RenderResult } from "../core/render/pipeline.js";

type Kind = "object" | "annotation" | "claim" | "other";

function kindOf(w: Warning): Kind {
  if (w.owner !== undefined) return "claim";
  if (w.annotation !== undefined) return "annotation";
  return w.service === "-" ? "object" : "other";
}

function label(value: string): string {
  return `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
}

export function renderMetrics(result: RenderResult): string {
  const kinds: Record<Kind, number> = { object: 0, annotation: 0, claim: 0, other: 0 };
  const refused = new Map<string, number>();
  for (const w of result.warnings) {
    kinds[kindOf(w)]++;
    if (w.owner === undefined) continue;
    const key = `{service=${label(w.service)},annotation=${label(w.annotation ?? "")},owner=${label(w.owner)}}`;
    refused.set(key, (refused.get(key) ?? 0) + 1);
  }
  const lines = [
    "# HELP servicelb_render_warnings Warnings of the render of the current cluster state, by kind (object: refused object; annotation: invalid value; claim: a host or path claim refused; other).",
    "# TYPE servicelb_render_warnings gauge",
    ...Object.entries(kinds).map(([kind, n]) => `servicelb_render_warnings{kind="${kind}"} ${n}`),
    "# HELP servicelb_route_claims_refused Hosts and paths a Service claims (its own paths included) and does not get, with who holds them (a Service, a namespace's path space ns/*, an HTTPRoute, --host-claims, or --own-hosts).",
    "# TYPE servicelb_route_claims_refused gauge",
    ...[...refused]
      .sort(([a], [b]) => compareStrings(a, b))
      .map(([key, n]) => `servicelb_route_claims_refused${key} ${n}`),
    "# HELP servicelb_render_skipped Services and ports not exposed, each with a reason in the JSON dry run.",
    "# TYPE servicelb_render_skipped gauge",
    `servicelb_render_skipped ${result.skipped.length}`,
    "# HELP servicelb_render_revision Snapshot revision (highest resourceVersion) of the render.",
    "# TYPE servicelb_render_revision gauge",
    `servicelb_render_revision ${Number(result.revision)}`,
  ];
  return `${lines.join("\n")}\n`;
}
