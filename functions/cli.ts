import { Command, CommanderError, Option } from "commander";
import { optionSpecs } from "../shared/core/settings/options.js";
import { flagSyntax, OptionsError, type SettingSpecs } from "../shared/core/settings/settings.js";
import { SnapshotError } from "../shared/core/kubernetes/snapshot.js";
import { storeRetainSpec, storeSettingSpecs } from "../shared/core/settings/store-settings.js";
import { agentOptionSpecs } from "../shared/agent/options.js";
import { clusterSettingSpecs, notifySettingSpecs } from "../shared/app/function-options.js";
import { packageVersion } from "../shared/adapters/package-version.js";
import { errorMessage } from "../shared/core/error-message.js";

// The AWS SDK's notice that its releases after January 2027 need Node 22 would otherwise open
// every store command's output (the SDK accepts only "true" here).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

/**
 * `servicelb <command>`: exit 0 on success, 2 on bad flags or input, 1 on runtime failure.
 * Each command loads its modules when it runs, so `render --snapshot` never pays for the
 * Kubernetes and S3 clients.
 */
const program = new Command("servicelb")
  .description("Keeps HAProxy in sync with Kubernetes Services")
  .exitOverride()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

const CONFIG_HELP = "options file (YAML or JSON, camelCase keys); flags and SERVICELB_* variables override it";

/** A flag for each setting of `specs` a flag may set, with the spec's help. */
function addSettings(cmd: Command, specs: SettingSpecs): Command {
  for (const [key, spec] of Object.entries(specs)) {
    const syntax = flagSyntax(key, spec);
    if (syntax) cmd.addOption(new Option(syntax, spec.help));
  }
  return cmd;
}

function addRenderOptions(cmd: Command): Command {
  return addSettings(addSettings(cmd, optionSpecs).option("--config <file>", CONFIG_HELP), clusterSettingSpecs);
}

/** Where published configs live; the same settings the reconcile function and the agent read. */
function addStoreOptions(cmd: Command): Command {
  return addSettings(cmd, storeSettingSpecs);
}

addRenderOptions(
  program
    .command("render")
    .description("render haproxy.cfg for a snapshot file or the live cluster; publishes nothing")
    .option("--snapshot <file>", "kubectl get services,endpointslices -A -o json|yaml output; - for stdin")
    .addOption(new Option("--format <format>", "output").choices(["cfg", "json"]).default("cfg"))
    .option("--check", "also validate the result with haproxy -c")
    .option(
      "--gateway-certs <refs>",
      "the certificateRefs (namespace/name, comma-separated) the dry run takes every node to hold in its --gateway-cert-dir; Gateway HTTPS listeners bind only those (default: none)",
    )
    .option(
      "--out <dir>",
      "write what the agent puts on disk (haproxy.cfg, maps/, patterns/) into this new, empty or previously rendered directory instead of printing the config",
    ),
).action(async (flags: Record<string, unknown>) => {
  const { runRender } = await import("../shared/app/render-command.js");
  process.exitCode = await runRender(flags);
});

program
  .command("serve-render")
  .description(
    "serve the render function (the HTTP dry run) on a local port, as functions-framework does; settings from SERVICELB_* variables",
  )
  .option("--port <port>", "port to listen on (default: 8090; 8080 is npm start's HAProxy)")
  .option("--host <address>", "address to listen on (default: every address, as functions-framework)")
  .action(async (flags: { port?: string; host?: string }) => {
    const { runServeRender } = await import("../shared/app/serve-render-command.js");
    process.exitCode = await runServeRender(flags);
  });

addStoreOptions(
  program
    .command("history")
    .description("list the published configs, newest first")
    .option("--limit <n>", "how many to list (0: all)", "20")
    .addOption(new Option("--format <format>", "output").choices(["text", "json"]).default("text"))
    .option("--config <file>", CONFIG_HELP),
).action(async (flags: Record<string, unknown>) => {
  const { runHistory } = await import("../shared/app/history-command.js");
  process.exitCode = await runHistory(flags);
});

addStoreOptions(
  program
    .command("diff")
    .description("unified diff of two published configs, named by key, file name, revision, latest or latest~N")
    .argument("<from>", "the older config")
    .argument("<to>", "the newer config")
    .option("--settings", "compare the settings the two were rendered with instead of the configs")
    .option("--config <file>", CONFIG_HELP),
).action(async (from: string, to: string, flags: Record<string, unknown>) => {
  const { runDiff } = await import("../shared/app/history-command.js");
  process.exitCode = await runDiff(from, to, flags);
});

addStoreOptions(
  program
    .command("pin")
    .description(
      "make every agent run this config (key, file name, revision, latest or latest~N) until `servicelb unpin`",
    )
    .argument("<ref>", "the config to pin")
    .option("--reason <text>", "shown by `servicelb status`")
    .option("--config <file>", CONFIG_HELP),
).action(async (ref: string, flags: Record<string, unknown>) => {
  const { runPin } = await import("../shared/app/pin-command.js");
  process.exitCode = await runPin(ref, flags);
});

addStoreOptions(
  program
    .command("unpin")
    .description("let every agent follow the newest config again")
    .option("--config <file>", CONFIG_HELP),
).action(async (flags: Record<string, unknown>) => {
  const { runUnpin } = await import("../shared/app/pin-command.js");
  process.exitCode = await runUnpin(flags);
});

const rollout = program
  .command("rollout")
  .description("the canary rollout (SERVICELB_CANARY): status, or move it on by hand (`pin` still wins over it)");
addStoreOptions(
  rollout
    .command("status")
    .description(
      "the stable config, the candidate, its wave, the last gate's figures and the outcomes before (exit 3: failed)",
    )
    .addOption(new Option("--format <format>", "output").choices(["text", "json"]).default("text"))
    .option("--config <file>", CONFIG_HELP),
).action(async (flags: Record<string, unknown>) => {
  const { runRolloutStatus } = await import("../shared/app/rollout-command.js");
  process.exitCode = await runRolloutStatus(flags);
});
addStoreOptions(
  rollout
    .command("promote")
    .description("start the next wave now; after a failed gate, run the candidate on every node")
    .option("--config <file>", CONFIG_HELP),
).action(async (flags: Record<string, unknown>) => {
  const { runRolloutAction } = await import("../shared/app/rollout-command.js");
  process.exitCode = await runRolloutAction("promote", flags);
});
addStoreOptions(
  rollout
    .command("abort")
    .description(
      "put every node back on the stable config and reject the candidate; after a failed gate, let structural configs roll out again",
    )
    .option("--config <file>", CONFIG_HELP),
).action(async (flags: Record<string, unknown>) => {
  const { runRolloutAction } = await import("../shared/app/rollout-command.js");
  process.exitCode = await runRolloutAction("abort", flags);
});

addStoreOptions(
  addRenderOptions(
    addSettings(
      program
        .command("reconcile")
        .description(
          "one reconcile pass from a shell: list the cluster, publish, ping the agents; renders with the settings recorded in the store unless flags say otherwise",
        )
        .requiredOption("--once", "run one pass and exit (the deployed function is event-driven)"),
      { storeRetain: storeRetainSpec, ...notifySettingSpecs },
    ),
  ),
).action(async (flags: Record<string, unknown>) => {
  const { runReconcileOnce } = await import("../shared/app/reconcile-command.js");
  process.exitCode = await runReconcileOnce(flags);
});

addSettings(
  program
    .command("agent")
    .description(
      "the node agent: pull, verify, haproxy -c, reload or runtime update; serves /notify, /healthz, /metrics, /status",
    ),
  agentOptionSpecs,
).action(async (flags: Record<string, unknown>) => {
  const { runAgent } = await import("../shared/app/agent-command.js");
  const { tracerFromEnv } = await import("../shared/adapters/stage-trace.js");
  const { traceAgent } = await import("../shared/app/agent-trace.js");
  const trace = tracerFromEnv(process.env)?.("agent");
  process.exitCode = await runAgent(flags, { decorate: trace && traceAgent(trace) });
});

addStoreOptions(
  program
    .command("status")
    .description(
      "how many nodes run the newest config, how many are behind or down, and the oldest config still served; --nodes: each node",
    )
    .option("--nodes", "a line per node after the summary (JSON always has every node)")
    .addOption(new Option("--format <format>", "output").choices(["text", "json"]).default("text"))
    .option("--config <file>", CONFIG_HELP),
).action(async (flags: Record<string, unknown>) => {
  const { runStatus } = await import("../shared/app/status-command.js");
  process.exitCode = await runStatus(flags);
});

for (const cmd of [program, ...program.commands]) cmd.version(packageVersion());

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else if (err instanceof OptionsError || err instanceof SnapshotError) {
    process.stderr.write(`servicelb: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`servicelb: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  }
}
