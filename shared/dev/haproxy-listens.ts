import { connect } from "node:net";
import { describePortInUse, portFree, portHolder, type PortHolder } from "../adapters/port-holder.js";
import { errorMessage } from "../core/error-message.js";

/**
 * What `npm start` may claim about HAProxy: its ports are checked before anything starts (a taken
 * port fails the start, naming what holds it), and the banner shows HAProxy's address only once
 * this stack's HAProxy listens there.
 */
export class PortInUseError extends Error {
  override readonly name = "PortInUseError";
}

/**
 * HAProxy processes carry their master socket on the command line: ours are those with one of this
 * stack's (its nodes share the ports, each on its own address).
 */
function ours(holder: PortHolder | undefined, masterSockets: readonly string[]): boolean {
  return masterSockets.some((socket) => holder?.command.includes(socket) === true);
}

/**
 * Throws PortInUseError for the first port something else listens on. An HAProxy left running
 * by an earlier run on the same data directory is no obstacle: HAProxy binds with SO_REUSEPORT,
 * and the agent retires that master once its own serves.
 */
export async function assertPortsFree(
  ports: Array<{ port: number; flag: string }>,
  masterSockets: readonly string[],
): Promise<void> {
  for (const { port, flag } of ports) {
    let free: boolean;
    try {
      free = await portFree(port);
    } catch (err) {
      throw new PortInUseError(`port ${port} (${flag}) cannot be bound: ${errorMessage(err)}`);
    }
    if (free) continue;
    const holder = portHolder(port);
    if (!ours(holder, masterSockets)) throw new PortInUseError(describePortInUse(port, flag, holder));
  }
}

export type HaproxyState = { listening: true } | { listening: false; reason: string };

export interface WaitForHaproxyOptions {
  /** The node's address, where its HAProxy listens. */
  host: string;
  httpPort: number;
  statsPort: number;
  /** Every master socket of this stack's HAProxies. */
  masterSockets: readonly string[];
  /** The agent's /status, which says why nothing listens yet. */
  agentStatusUrl: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, host);
    sock.once("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => resolve(false));
  });
}

/** Listening, and (where /proc tells) by this stack's HAProxy; else why not, in words for the banner. */
export async function haproxyState(o: Omit<WaitForHaproxyOptions, "timeoutMs" | "signal">): Promise<HaproxyState> {
  for (const [port, what] of [
    [o.httpPort, "HTTP"],
    [o.statsPort, "stats"],
  ] as const) {
    if (await accepts(o.host, port)) {
      const holder = portHolder(port);
      if (holder && !ours(holder, o.masterSockets))
        return {
          listening: false,
          reason: `its ${what} port ${port} is held by pid ${holder.pid} (${holder.command}), not by this stack's HAProxy`,
        };
      continue;
    }
    return {
      listening: false,
      reason: `nothing listens on its ${what} port ${port}: ${await agentSays(o.agentStatusUrl)}`,
    };
  }
  return { listening: true };
}

async function agentSays(url: string): Promise<string> {
  let status: { applied?: { key?: string | null } | null; lastError?: { stage: string; message: string } | null };
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    status = (await r.json()) as typeof status;
  } catch (err) {
    return `the agent does not answer at ${url} (${errorMessage(err)})`;
  }
  if (status.lastError) return `the agent's last ${status.lastError.stage} failed: ${status.lastError.message}`;
  if (!status.applied) return "no config applied yet (the reconcile function has published none; its log says why)";
  return `the config the agent runs (${status.applied.key ?? "unknown key"}) does not listen there`;
}

/** Polls until this stack's HAProxy listens or timeoutMs passes; the last reason when it does not. */
export async function waitForHaproxy(o: WaitForHaproxyOptions): Promise<HaproxyState> {
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    o.signal?.throwIfAborted();
    const state = await haproxyState(o);
    if (state.listening || Date.now() >= deadline) return state;
    await new Promise((r) => setTimeout(r, 200));
  }
}
