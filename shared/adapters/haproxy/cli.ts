import { createConnection } from "node:net";

export interface CliOptions {
  /** Whole-exchange deadline; HAProxy answers in milliseconds, so a hang means a wedged or re-executing process. */
  timeoutMs?: number;
}

/**
 * One command over an HAProxy CLI unix socket (master or stats), non-interactive mode.
 * The write side is half-closed after the command: the 2.6 master CLI keeps the connection
 * open until the client shuts down its side (measured), while the stats socket closes on
 * its own. Returns the answer with HAProxy's trailing blank line(s) removed.
 */
export function cliCommand(socketPath: string, cmd: string, opts: CliOptions = {}): Promise<string> {
  return cliBatch(socketPath, [cmd], opts);
}

/**
 * Several commands on one connection, `;`-separated as HAProxy's CLI takes them: one round trip
 * instead of one per command. The answers come back concatenated, each ending in a newline.
 * Keep a batch well under HAProxy's buffer (tune.bufsize, 16 KiB): the line must fit in it.
 */
export async function cliBatch(socketPath: string, cmds: readonly string[], opts?: CliOptions): Promise<string> {
  return (await cliExchange(socketPath, cmds, opts)).replace(/\n+$/, "");
}

/** As cliBatch, with HAProxy's output as it came, the empty line that ends each answer included. */
export function cliExchange(
  socketPath: string,
  cmds: readonly string[],
  { timeoutMs = 5000 }: CliOptions = {},
): Promise<string> {
  const bad = cmds.find((c) => /[\n;]/.test(c));
  if (bad !== undefined) {
    // HAProxy splits on both; a smuggled second command would run with our privileges.
    return Promise.reject(new Error(`refusing CLI command with ';' or newline: ${JSON.stringify(bad)}`));
  }
  const cmd = cmds.join(";");
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = createConnection(socketPath);
    const timer = setTimeout(() => {
      sock.destroy();
      const shown = cmd.length > 200 ? `${cmd.slice(0, 200)}…` : cmd;
      reject(new Error(`HAProxy CLI ${socketPath}: no complete answer to "${shown}" within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on("connect", () => sock.end(`${cmd}\n`));
    sock.on("data", (c: Buffer) => chunks.push(c));
    sock.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on("close", (hadError) => {
      clearTimeout(timer);
      if (!hadError) resolve(Buffer.concat(chunks).toString("utf8"));
    });
  });
}
