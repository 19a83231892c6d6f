import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect, createServer } from "node:net";

/**
 * A free loopback port below the kernel's ephemeral range. A port the kernel handed out for
 * bind(0) and that was released again is soon handed to some outgoing connection as its source
 * port, so on a busy machine (load tests beside) the server meant for it may find it taken.
 */
export async function freePort(): Promise<number> {
  const [low] = ephemeralRange();
  const floor = 10_000;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = floor + Math.floor(Math.random() * (low - floor));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found between ${floor} and ${low}`);
}

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (low && high && low > 11_000) return [low, high];
  } catch {
    // Not Linux: the IANA dynamic range.
  }
  return [49152, 65535];
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

export const STACK_PORTS = ["s3", "reconcile", "render", "agent"] as const;
export type StackPorts = Record<(typeof STACK_PORTS)[number], number>;

/**
 * The local stack's internal ports, kept in `<dataDir>/ports.json`: a restart on the same data
 * dir listens where the last one did, so the commands its banner prints (the store's endpoint
 * above all) stay the same. A port given (--store-port) is taken as is; a saved one that is now
 * taken is replaced by a free one.
 */
export async function stackPorts(dataDir: string, given: Partial<StackPorts> = {}): Promise<StackPorts> {
  const file = join(dataDir, "ports.json");
  let saved: Partial<StackPorts> = {};
  try {
    if (existsSync(file)) saved = JSON.parse(readFileSync(file, "utf8")) as Partial<StackPorts>;
  } catch {
    // Unreadable: chosen afresh, and written again below.
  }
  const ports: Partial<StackPorts> = {};
  const taken = new Set<number>(Object.values(given));
  for (const name of STACK_PORTS) {
    const want = given[name] ?? saved[name];
    let port = given[name];
    if (port === undefined && Number.isInteger(want) && !taken.has(want!) && (await bindable(want!))) port = want;
    while (port === undefined || (given[name] === undefined && taken.has(port))) port = await freePort();
    taken.add(port);
    ports[name] = port;
  }
  writeFileSync(file, `${JSON.stringify(ports)}\n`);
  return ports as StackPorts;
}

/** Resolves once something accepts connections on host:port. */
export async function waitForPort(port: number, what: string, timeoutMs = 20_000, host = "127.0.0.1"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((done) => {
      const sock = connect(port, host);
      sock.once("connect", () => {
        sock.destroy();
        done(true);
      });
      sock.once("error", () => done(false));
    });
    if (open) return;
    if (Date.now() > deadline)
      throw new Error(`${what} did not start listening on ${host}:${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
