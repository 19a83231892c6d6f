import { OptionsError } from "../core/settings/settings.js";
import { consoleFormat, createConsole, type LogFormat } from "./console-log.js";
import { startLocalStack, type LocalStackOptions } from "./stack.js";
import { MAX_NODES } from "./stack-nodes.js";

/** What an entry point wires into the stack besides the flags. */
export type LocalWiring = Pick<LocalStackOptions, "delivery" | "tracer">;

function port(value: unknown, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new OptionsError(`${flag}: ${String(value)} is not a port`);
  return n;
}

/** The values of the flags, checked: what `npm start` can refuse before it builds or starts anything. */
export function localSettings(flags: Record<string, string | boolean | undefined>): {
  resyncMs: number;
  httpPort: number;
  statsPort: number;
  nodes: number;
  storePort?: number;
} {
  const resyncMs = Number(flags.resync);
  if (!Number.isInteger(resyncMs) || resyncMs < 1000)
    throw new OptionsError(`--resync: ${String(flags.resync)} is not a period in ms ≥ 1000`);
  const nodes = Number(flags.nodes ?? 1);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > MAX_NODES)
    throw new OptionsError(`--nodes: ${String(flags.nodes)} is not a whole number from 1 to ${MAX_NODES}`);
  return {
    nodes,
    resyncMs,
    httpPort: port(flags.httpPort, "--http-port"),
    statsPort: port(flags.statsPort, "--stats-port"),
    ...(flags.storePort === undefined ? {} : { storePort: port(flags.storePort, "--store-port") }),
  };
}

/** `npm start`: runs until SIGINT/SIGTERM, then stops every process it started. */
export async function runLocal(
  flags: Record<string, string | boolean | undefined>,
  wiring: LocalWiring = {},
): Promise<number> {
  const out = createConsole(consoleFormat(flags.logFormat as LogFormat | undefined, process.stderr.isTTY === true));
  const log = out.log;
  const { resyncMs, httpPort, statsPort, nodes, storePort } = localSettings(flags);
  // From the start: the processes run in their own process groups, so Ctrl-C is ours to pass on.
  const stopping = new AbortController();
  const requested = new Promise<void>((resolve) => {
    const onSignal = () => {
      stopping.abort();
      resolve();
    };
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  });
  let stop: () => Promise<void>;
  try {
    stop = await startLocalStack({
      dataDir: String(flags.dataDir),
      clusterFile: String(flags.clusterFile),
      kubeconfig: flags.kubeconfig as string | undefined,
      demo: flags.demo === true,
      httpPort,
      statsPort,
      nodes,
      storePort,
      resyncMs,
      console: out,
      print: (text) => process.stdout.write(text),
      signal: stopping.signal,
      ...wiring,
    });
  } catch (err) {
    if (stopping.signal.aborted) {
      log.info("stopped before the start completed");
      return 0;
    }
    throw err;
  }
  await requested;
  log.info("stopping");
  await stop();
  log.info("stopped");
  return 0;
}
