import { execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { connect, createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { haproxyState } from "../../shared/dev/haproxy-listens.js";
import { portHolder } from "../../shared/adapters/port-holder.js";
import { requireHaproxy } from "../support/haproxy.js";
import { freePort, httpGet, waitFor } from "../support/net.js";
import { LOCAL_STACK_ENTRY } from "../support/dev-build.js";

const root = join(import.meta.dirname, "..", "..");
const linux = existsSync("/proc/net/tcp");

async function listen(port = 0): Promise<Server> {
  const server = createServer((s) => s.destroy());
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return server;
}

const portOf = (s: { address(): unknown }) => (s.address() as AddressInfo).port;
const close = (s: { close(cb: () => void): unknown }) => new Promise<void>((r) => s.close(() => r()));

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

function startStack(args: string[]) {
  const stack = spawn(process.execPath, [LOCAL_STACK_ENTRY, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const io = { out: "", err: "" };
  stack.stdout.on("data", (c: Buffer) => (io.out += c.toString()));
  stack.stderr.on("data", (c: Buffer) => (io.err += c.toString()));
  const exited = new Promise<number | null>((resolve) => stack.on("exit", (code) => resolve(code)));
  return { stack, io, exited };
}

describe("what listens on a port", () => {
  it.skipIf(!linux)("names the process that holds it, from /proc", async () => {
    const server = await listen();
    const port = portOf(server);
    try {
      const holder = portHolder(port);
      expect(holder?.pid).toBe(process.pid);
      expect(holder?.command).toContain(process.execPath.split("/").pop());
    } finally {
      await close(server);
    }
    expect(portHolder(port)).toBeUndefined();
  });

  it("says why HAProxy does not listen: nothing there and the agent's account, or another process there", async () => {
    const agent = createHttpServer((_, res) => res.end(JSON.stringify({ applied: null, lastError: null })));
    await new Promise<void>((r) => agent.listen(0, "127.0.0.1", r));
    const [httpPort, statsPort] = await Promise.all([freePort(), freePort()]);
    const o = {
      host: "127.0.0.1",
      httpPort,
      statsPort,
      masterSockets: ["/nonexistent/master.sock"],
      agentStatusUrl: `http://127.0.0.1:${portOf(agent)}/status`,
    };
    try {
      expect(await haproxyState(o)).toEqual({
        listening: false,
        reason: `nothing listens on its HTTP port ${httpPort}: no config applied yet (the reconcile function has published none; its log says why)`,
      });
      const squatter = await listen(httpPort);
      try {
        const state = await haproxyState(o);
        expect(state.listening).toBe(false);
        if (linux)
          expect((state as { reason: string }).reason).toMatch(
            new RegExp(
              `^its HTTP port ${httpPort} is held by pid ${process.pid} \\(.+\\), not by this stack's HAProxy$`,
            ),
          );
      } finally {
        await close(squatter);
      }
    } finally {
      await close(agent);
    }
  });
});

describe("npm start tells the truth", () => {
  const dir = mkdtempSync(join(tmpdir(), "servicelb-truth-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("fails at once when its HAProxy port is taken, naming the port and what holds it, and leaves nothing running", async () => {
    requireHaproxy();
    const taken = await listen();
    const data = join(dir, "clash");
    try {
      const { io, exited } = startStack([
        "--demo",
        "--data-dir",
        data,
        "--http-port",
        String(portOf(taken)),
        "--stats-port",
        String(await freePort()),
      ]);
      expect(await exited).toBe(1);
      const holder = linux ? ` by pid ${process.pid} \\(` : "";
      expect(io.err).toMatch(
        new RegExp(
          `^servicelb: port ${portOf(taken)} \\(--http-port\\) is in use${holder}.*: stop it, or pass --http-port with a free port\\n$`,
          "m",
        ),
      );
      expect(io.out).toBe("");
      expect(spawnSync("pgrep", ["-f", data], { encoding: "utf8" }).stdout.trim()).toBe("");
    } finally {
      await close(taken);
    }
  });

  it("prints HAProxy's address once it listens there, and store commands that work as printed; routine events are not warnings", async () => {
    requireHaproxy();
    const [httpPort, statsPort, web1, web2, api] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const file = join(dir, "cluster.yaml");
    const cluster = (web: number) =>
      readFileSync(join(root, "examples", "cluster.yaml"), "utf8")
        .replaceAll("18181", String(web))
        .replaceAll("18182", String(api));
    writeFileSync(file, cluster(web1));
    const { stack, io, exited } = startStack([
      "--demo",
      "--cluster-file",
      file,
      "--data-dir",
      join(dir, "data"),
      "--http-port",
      String(httpPort),
      "--stats-port",
      String(statsPort),
    ]);
    try {
      await waitFor("the banner", async () => (io.out.includes("Ctrl-C stops everything.") ? true : undefined), 60_000);
      // The banner's claim holds at the moment it is made.
      expect(io.out).toContain(
        `  HAProxy          http://127.0.0.1:${httpPort}/   stats http://127.0.0.1:${statsPort}/`,
      );
      expect([await accepts(httpPort), await accepts(statsPort)]).toEqual([true, true]);

      const commands = io.out.split("\n").filter((l) => l.includes("npx servicelb "));
      expect(commands.map((l) => /npx servicelb (\w+)/.exec(l)![1])).toEqual(["history", "diff", "status"]);
      // Asynchronous, so that this process keeps reading the stack's output meanwhile (a blocked
      // reader stalls a stack that logs). The watchdog only ends a hung command: a CLI start on a
      // starved machine (load 15-20 on two cores) took over 60 s.
      const run = (line: string) =>
        new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          execFile("sh", ["-c", line], { cwd: root, encoding: "utf8", timeout: 150_000 }, (err, stdout, stderr) =>
            resolve({ status: err ? (typeof err.code === "number" ? err.code : null) : 0, stdout, stderr }),
          );
        });
      const history = await run(commands[0]!);
      expect(history.status, history.stderr).toBe(0);
      expect(history.stdout.trim().split("\n").length).toBeGreaterThanOrEqual(2);
      const status = await run(commands[2]!);
      expect(status.stderr).not.toContain("required");
      expect(status.stdout).toContain("local");

      // Move the web pod: a second config, so that the printed diff has two to compare.
      writeFileSync(file, cluster(web2));
      await waitFor(
        "the moved endpoint served",
        async () => ((await httpGet(httpPort, "/web/x")).body.includes(String(web2)) ? true : undefined),
        20_000,
      );
      const diff = await run(commands[1]!);
      expect(diff.status, diff.stderr).toBe(0);
      expect(diff.stdout).toContain(`+`);
      expect(diff.stdout).toContain(String(web2));

      stack.kill("SIGINT");
      expect(await exited).toBe(0);
      // Records are JSON when stderr is not a terminal: none at WARN or above for a start, an
      // endpoint move and a Ctrl-C (the final status reaches the store, which stops after the agent).
      const records = io.err
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as { level: number; msg: string; haproxy?: string });
      expect(records.length).toBeGreaterThan(0);
      expect(records.filter((r) => r.level >= 40).map((r) => `${r.msg} ${r.haproxy ?? ""}`)).toEqual([]);
      expect(records.some((r) => r.haproxy?.includes("going DOWN for maintenance"))).toBe(true);
    } catch (e) {
      stack.kill("SIGINT");
      await exited;
      throw new Error(`${(e as Error).message}\n--- stdout\n${io.out}\n--- stderr\n${io.err.slice(-6000)}`);
    }
    // A whole stack started, three CLI processes, an edit and a stop: minutes on a busy machine.
  }, 480_000);
});
