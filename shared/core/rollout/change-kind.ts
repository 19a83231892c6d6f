/*
 * Whether a config differs from another only in what the agent applies through the runtime API
 * (server addresses and states in existing slots, slots a backend adds at run time, lines of
 * route maps and access lists) or needs a reload: the test a canary rollout is started by
 * (docs/design.md#canary-rollouts). The same pieces the agent's own decision uses (haproxy-config/diff.ts,
 * pattern-files.ts), without the runtime plan: a plan that falls back to a reload on one node
 * (no spare slot for an in-place move) is still a change of endpoints, not of structure.
 */

import { diffConfigs } from "../haproxy-config/diff.js";
import { parseConfig } from "../haproxy-config/parse.js";
import { diffPatternFiles } from "../haproxy-config/pattern-files.js";

export type ChangeKind = "identical" | "endpoints" | "structural";

export function changeKind(from: string, to: string): ChangeKind {
  if (from === to) return "identical";
  const a = parseConfig(from);
  const b = parseConfig(to);
  if ("error" in a || "error" in b) return "structural";
  if (diffPatternFiles(a.files, b.files).kind === "reload") return "structural";
  return diffConfigs(a, b).kind === "reload" ? "structural" : "endpoints";
}
