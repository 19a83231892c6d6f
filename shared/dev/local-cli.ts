/*
 * The flags of `npm start` (`npm start -- --help`), parsed for runLocal. Exit codes as the
 * servicelb CLI's: 0 success, 2 bad flags, 1 runtime failure.
 */

import { Command, CommanderError, Option } from "commander";
import { packageVersion } from "../adapters/package-version.js";
import { OptionsError } from "../core/settings.js";
import { type LocalWiring, runLocal } from "./local-command.js";

export async function localCli(argv: readonly string[], wiring: LocalWiring = {}): Promise<number> {
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
    .option("--http-port <port>", "HAProxy's HTTP port on 127.0.0.1", "8080")
    .option("--stats-port <port>", "HAProxy's stats port on 127.0.0.1", "8404")
    .option("--resync <ms>", "resync period (PingSource's role)", "30000")
    .addOption(
      new Option(
        "--log-format <format>",
        "console log: human (default on a terminal) or json (default otherwise)",
      ).choices(["human", "json"]),
    )
    .action(async (flags: Record<string, string | boolean | undefined>) => {
      code = await runLocal(flags, wiring);
    });
  try {
    await program.parseAsync(argv);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    process.stderr.write(`servicelb: ${(err as Error).message}\n`);
    return err instanceof OptionsError ? 2 : 1;
  }
}
