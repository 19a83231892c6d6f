import { OptionsError } from "../shared/core/settings/settings.js";
import { tracerFromEnv } from "../shared/adapters/stage-trace.js";
import { runAgent } from "../shared/app/agent-command.js";
import { traceAgent } from "../shared/app/agent-trace.js";
import { errorMessage } from "../shared/core/error-message.js";

/** The agent's process entry for the DaemonSet: settings from SERVICELB_* variables; exit 2 on bad settings. */
// bench/e2e's stage trace, when SERVICELB_TRACE_FILE names a file: wrapped around the agent's stages, never inside them.
const trace = tracerFromEnv(process.env)?.("agent");
try {
  process.exitCode = await runAgent({}, { decorate: trace && traceAgent(trace) });
} catch (err) {
  process.stderr.write(`servicelb agent: ${errorMessage(err)}\n`);
  process.exitCode = err instanceof OptionsError ? 2 : 1;
}
