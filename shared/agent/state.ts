/*
 * What the agent has applied and what last went wrong, kept on disk so that a restarted agent
 * knows which published config its haproxy.cfg is. The file is written after the config file,
 * so a crash in between leaves a config whose digest does not match: the agent then treats it
 * as unknown and lets the newest published config decide (see applier.ts).
 */

import { z } from "zod";
import type { Logger } from "../adapters/log.js";
import { digestSchema } from "../core/config-digest.js";
import { readIfExists, writeFileAtomic } from "./files.js";
import { errorMessage } from "../core/error-message.js";

export const appliedSchema = z.object({
  /** The store key; null for a config on disk whose key the agent does not know. */
  key: z.string().nullable(),
  /** The config's digest (core/config-digest.ts): sha256 hex, or tree1:<hex>. */
  sha256: digestSchema,
  revision: z.string().nullable(),
  appliedAt: z.string(),
  /** How it went live: at HAProxy start, by a reload, through the runtime API, or it already was. */
  how: z.enum(["start", "reload", "runtime", "unchanged"]),
});

export const agentErrorSchema = z.object({
  /** pull: the store; verify: digest or metadata; check: haproxy -c; apply: runtime API, reload or start. */
  stage: z.enum(["pull", "verify", "check", "apply"]),
  key: z.string().nullable(),
  message: z.string(),
  at: z.string(),
});

const stateSchema = z.object({ applied: appliedSchema.nullable(), lastError: agentErrorSchema.nullable() });

export type AppliedConfig = z.infer<typeof appliedSchema>;
export type AgentError = z.infer<typeof agentErrorSchema>;
export type AgentState = z.infer<typeof stateSchema>;

export const EMPTY_STATE: AgentState = { applied: null, lastError: null };

/** The saved state; a missing or unreadable file means "nothing known" (never fatal: the store has the truth). */
export async function loadState(file: string, log: Logger): Promise<AgentState> {
  const text = await readIfExists(file);
  if (text === null) return EMPTY_STATE;
  try {
    return stateSchema.parse(JSON.parse(text));
  } catch (err) {
    log.warn({ file, err: errorMessage(err) }, "ignoring an unreadable agent state file");
    return EMPTY_STATE;
  }
}

export async function saveState(file: string, state: AgentState): Promise<void> {
  await writeFileAtomic(file, `${JSON.stringify(state, null, 2)}\n`);
}
