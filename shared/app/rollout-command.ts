/*
 * `servicelb rollout status | promote | abort` (docs/design.md#canary-rollouts): what rollout.json
 * says — the stable config, the rollout's candidate, its wave and which nodes it admits, the last
 * gate's figures, why it is held or failed, the outcomes before — and the operator's two levers.
 * promote starts the next wave now (after a failure: runs the candidate on every node); abort puts
 * every node back on the stable config and rejects the candidate (after a failure: closes the
 * rollout, so that structural configs roll out again). The reconcile function carries on from the
 * record it finds at its next pass; `pin` still wins over either.
 */

import { abortRollout, promoteRollout, type StepResult } from "../core/rollout/rollout.js";
import { admittedNodes, type RolloutRecord } from "../core/rollout/rollout-record.js";
import { OptionsError } from "../core/settings/settings.js";
import { withStore } from "./history-command.js";

export async function runRolloutStatus(flags: Record<string, unknown>): Promise<number> {
  return withStore(flags, async (store) => {
    const record = await store.getRollout();
    if (flags.format === "json") {
      process.stdout.write(`${JSON.stringify(record, null, 2)}\n`);
      return 0;
    }
    process.stdout.write(describeRollout(record));
    // Like `status`: 3 while the fleet is not where the function wants it (a failed rollout).
    return record?.rollout?.state === "failed" ? 3 : 0;
  });
}

export async function runRolloutAction(action: "promote" | "abort", flags: Record<string, unknown>): Promise<number> {
  return withStore(flags, async (store) => {
    const record = await store.getRollout();
    if (record?.rollout == null)
      throw new OptionsError(
        record === null
          ? "no rollout.json: canary rollouts are off (SERVICELB_CANARY) or the function has not run a pass with them on"
          : `no rollout to ${action}: every node runs ${record.stable.key}`,
      );
    const step: StepResult =
      action === "promote" ? promoteRollout(record, new Date()) : abortRollout(record, new Date());
    await store.putRollout(step.record);
    for (const event of step.events) process.stdout.write(`${event}\n`);
    return 0;
  });
}

/** rollout.json in words, as `servicelb rollout status` prints it. */
export function describeRollout(record: RolloutRecord | null): string {
  if (record === null) return "no rollout.json: canary rollouts are off, every node follows the newest config\n";
  const lines = [`stable     ${record.stable.key}`];
  const r = record.rollout;
  if (r === null) lines.push("rollout    none: every node runs the stable config");
  else {
    const admitted = admittedNodes(r);
    lines.push(
      `candidate  ${r.candidate.key}`,
      `state      ${r.state}${r.reason ? `: ${r.reason}` : ""}`,
      r.state === "failed"
        ? `wave       ${r.wave + 1} of ${r.sizes.length} failed: every node is back on the stable config`
        : `wave       ${r.wave + 1} of ${r.sizes.length} since ${r.waveStartedAt}: ${admitted.length} of ${r.order.length} nodes run the candidate (${admitted.join(", ")})`,
    );
    if (r.gate) {
      lines.push(`gate       ${r.gate.verdict} at ${r.gate.at}: ${r.gate.reason}`);
      lines.push("           BACKEND  CANARY req/5xx/rtime  CONTROL req/5xx/rtime  VERDICT");
      for (const b of r.gate.backends)
        lines.push(`           ${b.backend}  ${side(b.canary)}  ${side(b.control)}  ${b.verdict}`);
    }
  }
  if (record.blocked) lines.push(`held back  ${record.blocked.key}: ${record.blocked.reason}`);
  for (const h of record.history.slice(-5).reverse())
    lines.push(`history    ${h.at} ${h.outcome} ${h.key}: ${h.reason}`);
  return `${lines.join("\n")}\n`;
}

const side = (s: { requests: number; errors: number; rtimeMs: number | null }) =>
  `${s.requests}/${s.errors}/${s.rtimeMs === null ? "-" : `${Math.round(s.rtimeMs)}ms`}`;
