import { connect, createServer, type AddressInfo } from "node:net";

/** A free loopback port: bind to 0, read it, release it. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts connections on 127.0.0.1:port. */
export async function waitForPort(port: number, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((done) => {
      const sock = connect(port, "127.0.0.1");
      sock.once("connect", () => {
        sock.destroy();
        done(true);
      });
      sock.once("error", () => done(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`${what} did not start listening on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
