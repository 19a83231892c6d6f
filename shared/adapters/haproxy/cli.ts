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
  return exchange(socketPath, `${cmd}\n`, cmd, timeoutMs);
}

/** Sends `request` whole, half-closes, and reads the answer until HAProxy closes. */
function exchange(socketPath: string, request: string, cmd: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = createConnection(socketPath);
    const timer = setTimeout(() => {
      sock.destroy();
      const shown = cmd.length > 200 ? `${cmd.slice(0, 200)}…` : cmd;
      reject(new Error(`HAProxy CLI ${socketPath}: no complete answer to "${shown}" within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on("connect", () => sock.end(request));
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

/**
 * A command that carries a payload (`<command> <<`, HAProxy 2.6): the payload's lines follow the
 * command and an empty line ends them. HAProxy runs whatever follows that empty line as further
 * commands, so a payload line may be neither empty nor hold a newline, and the command is checked
 * as cliExchange checks it. The whole request must fit in the CLI's buffer (tune.bufsize):
 * HAProxy drops a longer one without an answer.
 */
export function cliPayload(
  socketPath: string,
  cmd: string,
  payload: readonly string[],
  { timeoutMs = 5000 }: CliOptions = {},
): Promise<string> {
  if (/[\n;]/.test(cmd))
    return Promise.reject(new Error(`refusing CLI command with ';' or newline: ${JSON.stringify(cmd)}`));
  // No payload HAProxy takes (PEM) holds a ';': refused as in a command, in case a 2.6 parser splits on it.
  const bad = payload.findIndex((l) => l === "" || /[\r\n;]/.test(l));
  if (payload.length === 0 || bad >= 0)
    return Promise.reject(
      new Error(`refusing CLI payload for "${cmd}": line ${bad + 1} is empty or holds a line break or ';'`),
    );
  return exchange(socketPath, `${cmd} <<\n${payload.join("\n")}\n\n`, cmd, timeoutMs).then((a) =>
    a.replace(/\n+$/, ""),
  );
}
