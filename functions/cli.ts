import { Command, CommanderError, Option } from "commander";
import { BOOLEAN_OPTIONS, flagName, optionSpecs, OptionsError } from "../shared/core/options.js";
import { SnapshotError } from "../shared/core/snapshot.js";
import { runRender } from "../shared/app/render-command.js";

/** `servicelb <command>`: exit 0 on success, 2 on bad flags or input, 1 on runtime failure. */
const program = new Command("servicelb")
  .description("Keeps HAProxy in sync with Kubernetes Services")
  .exitOverride()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

function addRenderOptions(cmd: Command): Command {
  for (const [key, spec] of Object.entries(optionSpecs)) {
    const flag = flagName(key);
    cmd.addOption(new Option(BOOLEAN_OPTIONS.has(key as never) ? `--${flag}` : `--${flag} <value>`, spec.help));
  }
  return cmd
    .option("--config <file>", "options file (YAML or JSON, camelCase keys); flags and SERVICELB_* variables override it")
    .option("--template <file>", "main template; fragments beside it override the built-in ones")
    .option("--kubeconfig <file>", "kubeconfig for the live cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    .option("--context <name>", "kubeconfig context");
}

addRenderOptions(
  program
    .command("render")
    .description("render haproxy.cfg for a snapshot file or the live cluster; publishes nothing")
    .option("--snapshot <file>", "kubectl get services,endpointslices -A -o json|yaml output; - for stdin")
    .addOption(new Option("--format <format>", "output").choices(["cfg", "json"]).default("cfg"))
    .option("--check", "also validate the result with haproxy -c"),
).action(async (flags: Record<string, unknown>) => {
  process.exitCode = await runRender(flags);
});

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else if (err instanceof OptionsError || err instanceof SnapshotError) {
    process.stderr.write(`servicelb: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`servicelb: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
