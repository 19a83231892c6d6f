import { OptionsError } from "../shared/core/settings/settings.js";
import { tracerFromEnv } from "../shared/adapters/stage-trace.js";
import { runAgent } from "../shared/app/agent-command.js";
import { errorMessage } from "../shared/core/error-message.js";

/** The agent's process entry for the DaemonSet: settings from SERVICELB_* variables; exit 2 on bad settings. */
try {
  process.exitCode = await runAgent({}, { trace: tracerFromEnv(process.env)?.("agent") });
} catch (err) {
  process.stderr.write(`servicelb agent: ${errorMessage(err)}\n`);
  process.exitCode = err instanceof OptionsError ? 2 : 1;
}
