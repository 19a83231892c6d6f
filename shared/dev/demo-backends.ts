import { fork, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { fileURLToPath } from "node:url";
import type { Logger } from "../adapters/log.js";
import { errorMessage } from "../core/error-message.js";

/**
 * The demo cluster's backends, in a process of their own. HAProxy health-checks every server
 * slot (at 1,000 Services × 10 endpoints, thousands of connections a second all land on these few
 * loopback ports): served from the stack's own process, that traffic delayed the Kubernetes API
 * emulator and the event bridge, which in a real cluster never share a machine with the pods.
 *
 * A development tool survives what it is handed: an address it cannot listen on is an answer
 * with the error, never the child's crash, and a child that dies anyway (killed) is started again
 * with every backend it served, so the stack goes on serving.
 */

type Request = { id: number; host: string; port: number };
type Reply = { id: number; error?: string };

const body = (host: string, port: number, method: string | undefined, url: string | undefined) =>
  `demo backend ${host}:${port} answered ${method} ${url}\n`;

/** The parent's side: start(host, port) resolves once a backend listens there, or with the error that kept it from it. */
export class DemoBackends {
  private child: ChildProcess | undefined;
  private next = 0;
  private readonly waiting = new Map<number, (reply: Reply) => void>();
  /** What a child serves, by address: what a new child serves again. */
  private readonly served = new Map<string, { host: string; port: number }>();
  private stopping = false;

  constructor(private readonly log: Logger) {}

  start(host: string, port: number): Promise<Reply> {
    const child = this.child ?? this.revive();
    return this.request(child, host, port);
  }

  stop(): Promise<void> {
    this.stopping = true;
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
  }

  private settle(reply: Reply): void {
    this.waiting.get(reply.id)?.(reply);
    this.waiting.delete(reply.id);
  }

  private request(child: ChildProcess, host: string, port: number): Promise<Reply> {
    const id = this.next++;
    return new Promise<Reply>((resolve) => {
      this.waiting.set(id, resolve);
      // A child that is gone refuses the message: the answer says so, the parent carries on.
      child.send({ id, host, port } satisfies Request, (err) => {
        if (err) this.settle({ id, error: `the demo backends process is gone: ${err.message}` });
      });
    }).then((reply) => {
      if (!reply.error) this.served.set(`${host}:${port}`, { host, port });
      return reply;
    });
  }

  /** A new child, serving again whatever the one before it served. */
  private revive(): ChildProcess {
    const child = fork(fileURLToPath(import.meta.url), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    this.child = child;
    let answered = false;
    child.on("message", (m: Reply) => {
      answered = true;
      this.settle(m);
    });
    // A send to a child that just died fails through its callback; nothing is left unhandled.
    child.on("error", () => undefined);
    child.on("exit", (code, signal) => {
      if (this.child !== child) return;
      this.child = undefined;
      for (const id of [...this.waiting.keys()]) this.settle({ id, error: "the demo backends process exited" });
      if (this.stopping) return;
      this.log.warn(
        { code, signal, backends: this.served.size },
        "the demo backends process exited; starting it again with its backends",
      );
      // One that never answered would only die again at once: the next start() tries again.
      if (answered) this.revive();
    });
    for (const { host, port } of this.served.values())
      void this.request(child, host, port).then(({ error }) => {
        if (error) this.log.warn({ address: `${host}:${port}`, err: error }, "demo backend not started again");
      });
    return child;
  }
}

/** The child's side. */
function serve(): void {
  const servers: Server[] = [];
  process.on("message", (m: Request) => {
    const server = createServer((req, res) => {
      res.setHeader("content-type", "text/plain; charset=utf-8");
      res.end(body(m.host, m.port, req.method, req.url));
    });
    server.once("error", (err) => process.send!({ id: m.id, error: err.message } satisfies Reply));
    try {
      server.listen(m.port, m.host, () => {
        servers.push(server);
        process.send!({ id: m.id } satisfies Reply);
      });
    } catch (err) {
      // listen() throws at once for what is no port at all.
      process.send!({ id: m.id, error: errorMessage(err) } satisfies Reply);
    }
  });
  // The parent going away (even by SIGKILL) closes the IPC channel: no orphan keeps the ports.
  process.on("disconnect", () => process.exit(0));
  process.on("SIGTERM", () => process.exit(0));
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) serve();
