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
export function cliCommand(socketPath: string, cmd: string, { timeoutMs = 5000 }: CliOptions = {}): Promise<string> {
  if (/[\n;]/.test(cmd)) {
    // HAProxy splits on both; a smuggled second command would run with our privileges.
    return Promise.reject(new Error(`refusing CLI command with ';' or newline: ${JSON.stringify(cmd)}`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = createConnection(socketPath);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`HAProxy CLI ${socketPath}: no complete answer to "${cmd}" within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on("connect", () => sock.end(`${cmd}\n`));
    sock.on("data", (c: Buffer) => chunks.push(c));
    sock.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on("close", (hadError) => {
      clearTimeout(timer);
      if (!hadError) resolve(Buffer.concat(chunks).toString("utf8").replace(/\n+$/, ""));
    });
  });
}
