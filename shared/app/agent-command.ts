import { createLogger } from "../adapters/log.js";
import { type AgentDeps, startAgent } from "../agent/agent.js";
import { parseAgentOptions } from "../agent/options.js";

/**
 * `servicelb agent`: runs until SIGTERM or SIGINT, then stops HAProxy gracefully and returns 0.
 * Bad settings throw OptionsError before anything starts (the CLI exits 2).
 */
export async function runAgent(
  flags: Record<string, unknown>,
  wiring: Pick<AgentDeps, "decorate"> = {},
): Promise<number> {
  const options = parseAgentOptions(process.env, flags);
  const log = createLogger("agent");
  const agent = await startAgent(options, { log, decorate: wiring.decorate });
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
  log.info({ signal }, "stopping: HAProxy finishes its connections first");
  await agent.stop();
  return 0;
}
