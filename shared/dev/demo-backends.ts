import { fork, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { fileURLToPath } from "node:url";

/**
 * The demo cluster's backends, in a process of their own. HAProxy health-checks every server
 * slot (at 1,000 Services × 10 endpoints, thousands of connections a second all land on these few
 * loopback ports): served from the stack's own process, that traffic delayed the Kubernetes API
 * emulator and the event bridge, which in a real cluster never share a machine with the pods.
 */

type Request = { id: number; host: string; port: number };
type Reply = { id: number; error?: string };

const body = (host: string, port: number, method: string | undefined, url: string | undefined) =>
  `demo backend ${host}:${port} answered ${method} ${url}\n`;

/** The parent's side: start(host, port) resolves once a backend listens there (or the address is taken: the error says so). */
export class DemoBackends {
  private child: ChildProcess | undefined;
  private next = 0;
  private readonly waiting = new Map<number, (reply: Reply) => void>();

  start(host: string, port: number): Promise<Reply> {
    if (!this.child) {
      this.child = fork(fileURLToPath(import.meta.url), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
      this.child.on("message", (m: Reply) => {
        this.waiting.get(m.id)?.(m);
        this.waiting.delete(m.id);
      });
      this.child.on("exit", () => {
        for (const done of this.waiting.values()) done({ id: -1, error: "the demo backends process exited" });
        this.waiting.clear();
      });
    }
    const id = this.next++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child!.send({ id, host, port } satisfies Request);
    });
  }

  stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
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
    server.listen(m.port, m.host, () => {
      servers.push(server);
      process.send!({ id: m.id } satisfies Reply);
    });
  });
  // The parent going away (even by SIGKILL) closes the IPC channel: no orphan keeps the ports.
  process.on("disconnect", () => process.exit(0));
  process.on("SIGTERM", () => process.exit(0));
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) serve();
