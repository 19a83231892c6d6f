/*
 * The flags of `npm start` (`npm start -- --help`), parsed for runLocal. Exit codes as the
 * servicelb CLI's: 0 success, 2 bad flags, 1 runtime failure.
 */

import { Command, CommanderError, Option } from "commander";
import { packageVersion } from "../adapters/package-version.js";
import { OptionsError } from "../core/settings/settings.js";
import { type LocalWiring, localSettings, runLocal } from "./local-command.js";
import { MAX_NODES } from "./stack-nodes.js";
import { errorMessage } from "../core/error-message.js";

/**
 * `checkOnly`: parse and check the flags (and print --help or --version) without starting
 * anything: shared/dev/start.mjs asks this of the last build before it decides to rebuild.
 */
export async function localCli(
  argv: readonly string[],
  wiring: LocalWiring = {},
  { checkOnly = false, env = process.env }: { checkOnly?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  let code = 0;
  const program = new Command("servicelb-local")
    .description(
      "npm start: the whole pipeline on this machine (object store, functions, event bridge, agent with HAProxy)",
    )
    .version(packageVersion())
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    .option("--kubeconfig <file>", "watch this cluster (default: $KUBECONFIG or ~/.kube/config when present)")
    .option("--demo", "use the embedded demo cluster even when a kubeconfig exists")
    .option(
      "--cluster-file <file>",
      "the demo cluster (Services + EndpointSlices), re-applied when it changes",
      "examples/cluster.yaml",
    )
    .option("--data-dir <dir>", "where the object store and HAProxy files live", ".servicelb-local")
    .option("--http-port <port>", "HAProxy's HTTP port on 127.0.0.1 (with --nodes, on each node's address)", "8080")
    .option("--stats-port <port>", "HAProxy's stats port on 127.0.0.1 (with --nodes, on each node's address)", "8404")
    .option(
      "--nodes <n>",
      `agents, each with its own HAProxy on its own address (127.0.1.1, 127.0.1.2, ...), running one published config and rolling changes out in canary waves (1 to ${MAX_NODES})`,
      "1",
    )
    .option(
      "--store-port <port>",
      "the object store's port on 127.0.0.1 (default: the one this --data-dir had last time, else a free one)",
    )
    .option("--resync <ms>", "resync period (PingSource's role)", "30000")
    .addOption(
      new Option(
        "--log-format <format>",
        "console log: human (default on a terminal) or json (default otherwise)",
      ).choices(["human", "json"]),
    )
    .action(async (flags: Record<string, string | boolean | undefined>) => {
      if (checkOnly) localSettings(flags);
      else code = await runLocal(flags, wiring);
    });
  const kept = keptByNpm(program, argv.slice(2), env);
  if (kept) {
    process.stderr.write(`servicelb: ${kept}\n`);
    return 2;
  }
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    process.stderr.write(`servicelb: ${errorMessage(err)}\n`);
    return err instanceof OptionsError ? 2 : 1;
  }
}

/**
 * `npm start --http-port 1` gives --http-port to npm, which keeps it as a setting of its own
 * (npm_config_http_port=true) and passes on the "1" alone: said as such, with the command that
 * was meant, instead of commander's "too many arguments".
 */
function keptByNpm(program: Command, args: readonly string[], env: NodeJS.ProcessEnv): string | undefined {
  // --version is npm's own too (npm start --version prints npm's): never ours to claim.
  const kept = program.options.filter(
    (o) => o.long && o.long !== "--version" && env[`npm_config_${o.long.slice(2).replaceAll("-", "_")}`],
  );
  if (kept.length === 0) return undefined;
  // The values npm passed on, in order, belong to the kept flags that take one.
  const values = [...args];
  const meant = kept.map((o) => (o.required ? `${o.long} ${values.shift() ?? o.flags.split(" ")[1]}` : o.long!));
  return `npm took ${kept.map((o) => o.long).join(", ")} for itself: the stack's flags go after --, as in npm start -- ${[...meant, ...values].join(" ")}`;
}
