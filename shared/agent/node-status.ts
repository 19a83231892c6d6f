import { z } from "zod";
import { agentErrorSchema, appliedSchema } from "./state.js";

/** `status/<node>.json`: what one agent reports to the store, and what `servicelb status` reads. */
export const nodeStatusSchema = z.object({
  node: z.string(),
  /** The config HAProxy runs; null until it serves one. */
  applied: appliedSchema.nullable(),
  lastError: agentErrorSchema.nullable(),
  /** A failed config waiting for its retry. */
  backoff: z.object({ key: z.string(), attempts: z.number(), retryAt: z.string() }).nullable(),
  haproxy: z.object({ running: z.boolean() }),
  /** How often the agent reports: a report much older than this means the agent is gone or cut off. */
  reportIntervalSeconds: z.number(),
  reportedAt: z.string(),
  /** e.g. "servicelb/0.1.0" */
  agent: z.string(),
});

export type NodeStatus = z.infer<typeof nodeStatusSchema>;
