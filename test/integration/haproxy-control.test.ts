import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { Agent as HttpAgent, createServer, request as httpRequest, type Server } from "node:http";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkConfig, HAPROXY_INSTALL_HINT, haproxyAvailable } from "../../shared/adapters/haproxy/check.js";
import { masterCommand, showProc } from "../../shared/adapters/haproxy/master.js";
import { HaproxyProcess } from "../../shared/adapters/haproxy/process.js";
import type { RestartInfo } from "../../shared/adapters/haproxy/restart-policy.js";
import { processAlive } from "../../shared/adapters/haproxy/proc-info.js";
import {
  RuntimeApiError,
  RuntimeCommandsError,
  runRuntimeCommands,
  runtimeCommand,
  showServersState,
  showStat,
} from "../../shared/adapters/haproxy/runtime.js";
import type { RuntimeCommand } from "../../shared/core/haproxy-config/runtime-plan.js";
import { echoBackend, freePort, httpGet, waitFor, type EchoBackend } from "../support/net.js";

let dir: string;
let a: EchoBackend;
let b: EchoBackend;

beforeAll(async () => {
  // Missing HAProxy must fail these tests, never skip them.
  if ((await haproxyAvailable()) === null) throw new Error(`haproxy is not installed: run \`${HAPROXY_INSTALL_HINT}\``);
  dir = await mkdtemp(join(tmpdir(), "haproxy-control-"));
  a = await echoBackend("A");
  b = await echoBackend("B");
});

afterAll(async () => {
  await a?.close();
  await b?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Live (non-zombie) processes whose command line mentions `needle`, e.g. this test's config path. */
function livePids(needle: string): number[] {
  try {
    return execFileSync("pgrep", ["-f", needle], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map(Number)
      .filter(processAlive);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

interface Instance {
  name: string;
  port: number;
  cfgPath: string;
  masterSock: string;
  adminSock: string;
}

async function instance(name: string): Promise<Instance> {
  return {
    name,
    port: await freePort(),
    cfgPath: join(dir, `${name}.cfg`),
    masterSock: join(dir, `${name}-master.sock`),
    adminSock: join(dir, `${name}-admin.sock`),
  };
}

/** Our templates' shape: two slots, a disabled slot parked on 127.0.0.1:1. */
function config(
  inst: Instance,
  slots: { s1?: number; s2?: number },
  extra = { global: "    hard-stop-after 5s\n", serverTimeout: "5s" },
): string {
  const slot = (name: string, port?: number) =>
    `    server ${name} ${port ? `127.0.0.1:${port}` : "127.0.0.1:1 disabled"} check inter 500ms\n`;
  return (
    `global\n    stats socket ${inst.adminSock} mode 600 level admin\n${extra.global}\n` +
    `defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server ${extra.serverTimeout}\n\n` +
    `frontend fe\n    bind 127.0.0.1:${inst.port}\n    default_backend be\n\n` +
    `backend be\n    balance roundrobin\n${slot("s1", slots.s1)}${slot("s2", slots.s2)}`
  );
}

const addr = (server: string, address: string, port: number): RuntimeCommand => ({
  op: "addr",
  backend: "be",
  server,
  address,
  port,
});
const stateOf = (server: string, to: "ready" | "drain" | "maint"): RuntimeCommand => ({
  op: "state",
  backend: "be",
  server,
  state: to,
});

const served = (inst: Instance, by: string) =>
  waitFor(`traffic on :${inst.port} served by ${by}`, async () => {
    const r = await httpGet(inst.port, "/probe");
    return r.status === 200 && r.body.startsWith(`${by} `) ? r : undefined;
  });

describe("checkConfig", () => {
  it("accepts a valid config and returns its warnings without pids", async () => {
    const inst = await instance("check");
    const valid = await checkConfig(config(inst, { s1: a.port }));
    expect(valid).toEqual({ ok: true, warnings: [] });
    // No timeouts at all: HAProxy warns, over several continuation lines, but accepts.
    const warned = await checkConfig("frontend fe\n    mode http\n    bind 127.0.0.1:1\n", { workDir: dir });
    expect(warned.ok).toBe(true);
    if (!warned.ok) return;
    expect(warned.warnings[0]).toMatch(
      /^config : missing timeouts for frontend 'fe'\. While not properly invalid, .* 'client', 'connect', 'server'\.$/,
    );
  });

  it("rejects an invalid config with HAProxy's ALERT lines, cleaned", async () => {
    const r = await checkConfig("global\n    nosuchdirective 1\n", { workDir: dir });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors[0]).toBe(
      "config : parsing [haproxy.cfg:2] : unknown keyword 'nosuchdirective' in 'global' section",
    );
    expect(r.errors.join("\n")).not.toMatch(/\(\d+\)|haproxy-check-/);
    expect(r.output).toContain("[ALERT]");
  });

  it("throws, naming the install command, when the binary is missing", async () => {
    await expect(checkConfig("global\n", { haproxyBin: join(dir, "no-haproxy") })).rejects.toThrow(
      HAPROXY_INSTALL_HINT,
    );
    expect(await haproxyAvailable(join(dir, "no-haproxy"))).toBeNull();
  });
});

describe("HaproxyProcess, master socket and runtime API against a real HAProxy", () => {
  let inst: Instance;
  let proc: HaproxyProcess;
  const output: string[] = [];
  const restarts: RestartInfo[] = [];

  beforeAll(async () => {
    inst = await instance("main");
    await writeFile(inst.cfgPath, config(inst, { s1: a.port }));
    proc = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      onOutput: (line) => output.push(line),
      onRestart: (info) => restarts.push(info),
      restartInitialDelayMs: 200,
      stopGraceMs: 5000,
      killGraceMs: 2000,
    });
  });

  afterAll(async () => {
    await proc?.stop();
  });

  it("starts in the foreground, serves, and reports itself in show proc", async () => {
    await proc.start();
    expect(proc.running).toBe(true);
    await served(inst, "A");
    const status = await showProc(inst.masterSock);
    expect(status.master).toMatchObject({ pid: proc.pid, reloads: 0, failedReloads: 0 });
    expect(status.master.version).toMatch(/^\d+\.\d+/);
    expect(status.workers).toHaveLength(1);
    expect(status.workers[0]).toMatchObject({ reloads: 0, uptime: expect.stringMatching(/^\d+d\d\dh\d\dm\d\ds$/) });
    expect(status.workers[0]!.uptimeSeconds).toBeGreaterThanOrEqual(0);
    expect(status.oldWorkers).toEqual([]);
    expect(output.join("\n")).toMatch(/New worker \(\d+\) forked/);
  });

  it("reloads onto a changed config: the count goes up and traffic follows", async () => {
    const before = await showProc(inst.masterSock);
    await writeFile(inst.cfgPath, config(inst, { s1: b.port }));
    const r = await proc.reload();
    expect(r).toMatchObject({
      ok: true,
      reloadsBefore: before.master.reloads,
      reloadsAfter: before.master.reloads + 1,
    });
    expect(r.status.master.pid).toBe(proc.pid);
    expect(r.status.workers.map((w) => w.pid)).not.toContain(before.workers[0]!.pid);
    await served(inst, "B");
  });

  it("a reload onto a broken config file is reported failed and the old worker keeps serving", async () => {
    const before = await showProc(inst.masterSock);
    await writeFile(inst.cfgPath, "global\n    nosuchdirective 1\n");
    const r = await proc.reload();
    expect(r.ok).toBe(false);
    expect(r.reloadsAfter).toBe(r.reloadsBefore + 1);
    expect(r.status.master.failedReloads).toBe(1);
    expect(r.reason).toMatch(/failed reload/);
    expect(r.status.workers.map((w) => w.pid)).toEqual(before.workers.map((w) => w.pid));
    const answer = await httpGet(inst.port, "/still-up");
    expect(answer).toMatchObject({ status: 200, body: "B /still-up" });
    expect(output.join("\n")).toMatch(/unknown keyword 'nosuchdirective'/);

    // The next good reload succeeds and clears 2.6's failed counter.
    await writeFile(inst.cfgPath, config(inst, { s1: a.port }));
    const fixed = await proc.reload();
    expect(fixed).toMatchObject({ ok: true, status: { master: { failedReloads: 0 } } });
    await served(inst, "A");
  });

  it("changes a slot through the runtime API without a reload", async () => {
    const reloadsBefore = (await showProc(inst.masterSock)).master.reloads;
    await runRuntimeCommands(inst.adminSock, [
      addr("s2", "127.0.0.1", b.port),
      stateOf("s2", "ready"),
      stateOf("s1", "drain"),
      stateOf("s1", "maint"),
    ]);
    await served(inst, "B");
    expect((await showProc(inst.masterSock)).master.reloads).toBe(reloadsBefore);

    const s2 = (await showStat(inst.adminSock)).find((r) => r.pxname === "be" && r.svname === "s2");
    expect(s2).toMatchObject({ addr: `127.0.0.1:${b.port}` });
    expect(s2?.status).toMatch(/^UP/);
    const state = await showServersState(inst.adminSock);
    expect(state).toMatch(/^1\n# be_id be_name srv_id srv_name srv_addr/);
    expect(state).toMatch(new RegExp(`\\n\\d+ be 2 s2 127\\.0\\.0\\.1 .* ${b.port} `));
    expect(state.endsWith("\n")).toBe(true);

    // IPv6 with or without brackets is accepted by HAProxy.
    await runRuntimeCommands(inst.adminSock, [addr("s1", "[::1]", a.port)]);
    expect((await showStat(inst.adminSock)).find((r) => r.svname === "s1")?.addr).toBe(`[::1]:${a.port}`);
    await runRuntimeCommands(inst.adminSock, [stateOf("s2", "drain")]);
  });

  it("runs a line of slot commands on a connection per 150 of them, reading one answer per command", async () => {
    // 600 commands on one line of the plan: four connections of 150, every answer read.
    const many = Array.from({ length: 600 }, (_, i) => addr("s2", "127.0.0.1", 20_000 + i));
    await runRuntimeCommands(inst.adminSock, [stateOf("s2", "maint"), ...many, addr("s2", "127.0.0.1", b.port)]);
    await runRuntimeCommands(inst.adminSock, [stateOf("s2", "ready")]);
    const s2 = (await showStat(inst.adminSock)).find((r) => r.pxname === "be" && r.svname === "s2");
    expect(s2).toMatchObject({ addr: `127.0.0.1:${b.port}` });
    expect(s2?.status).not.toMatch(/MAINT/);
    await runRuntimeCommands(inst.adminSock, [stateOf("s2", "maint")]);
  });

  it("sends no line after one with a refused command", async () => {
    // The drain rests on the ready before it, so it is on the next line, which is not sent.
    await runRuntimeCommands(inst.adminSock, [stateOf("s1", "ready")]);
    const err = await runRuntimeCommands(inst.adminSock, [stateOf("nope", "ready"), stateOf("s1", "drain")]).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ tookEffect: 0, unknown: false });
    expect((await showStat(inst.adminSock)).find((r) => r.svname === "s1")?.status).not.toMatch(/DRAIN|MAINT/);
    // The same two on their own lines when the first is taken: the drain goes out.
    await runRuntimeCommands(inst.adminSock, [stateOf("s2", "ready"), stateOf("s1", "drain")]);
    expect((await showStat(inst.adminSock)).find((r) => r.svname === "s1")?.status).toMatch(/DRAIN/);
    await runRuntimeCommands(inst.adminSock, [stateOf("s1", "maint"), stateOf("s2", "maint")]);
  });

  it("says whether commands may have run when the socket gives no answer to read", async () => {
    // No socket: nothing was sent.
    await expect(runRuntimeCommands(join(dir, "no-such.sock"), [stateOf("s1", "drain")])).rejects.toMatchObject({
      tookEffect: 0,
      unknown: false,
    });
    // A socket that takes the line and closes without a word: any of it may have run.
    const mute = join(dir, "mute.sock");
    const server = createNetServer((sock) => sock.once("data", () => sock.end()));
    await new Promise<void>((r) => server.listen(mute, r));
    try {
      await expect(runRuntimeCommands(mute, [stateOf("s1", "drain")])).rejects.toMatchObject({
        tookEffect: 0,
        unknown: true,
      });
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("says how many commands of a line took effect when HAProxy refuses one: its CLI runs the rest", async () => {
    const err = await runRuntimeCommands(inst.adminSock, [
      addr("s2", "127.0.0.1", 30_001),
      stateOf("nope", "ready"),
      addr("s2", "127.0.0.1", 30_002),
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RuntimeCommandsError);
    expect(err).toMatchObject({ tookEffect: 2, unknown: false });
    expect((err as Error).message).toMatch(/"set server be\/nope state ready" failed: No such server/);
    expect((err as Error).cause).toBeInstanceOf(RuntimeApiError);
    expect((await showStat(inst.adminSock)).find((r) => r.svname === "s2")?.addr).toBe("127.0.0.1:30002");
    // Nothing is sent when a command is not one HAProxy could take: not half a plan.
    await expect(
      runRuntimeCommands(inst.adminSock, [addr("s2", "127.0.0.9", 80), addr("s2", "not-an-ip", 80)]),
    ).rejects.toThrow(/not an IP/);
    expect((await showStat(inst.adminSock)).find((r) => r.svname === "s2")?.addr).toBe("127.0.0.1:30002");
    await expect(runRuntimeCommands(inst.adminSock, [stateOf("s1;shutdown", "ready")])).rejects.toThrow(
      /invalid server name/,
    );
  });

  it("turns HAProxy's error answers into errors", async () => {
    await expect(runRuntimeCommands(inst.adminSock, [stateOf("nope", "ready")])).rejects.toThrow(/No such server/);
    await expect(
      runRuntimeCommands(inst.adminSock, [{ op: "state", backend: "nobe", server: "s1", state: "ready" }]),
    ).rejects.toMatchObject({ tookEffect: 0, unknown: false });
    await expect(runtimeCommand(inst.adminSock, "no such command")).rejects.toThrow(/Unknown command/);
    await expect(runtimeCommand(inst.adminSock, "show info; shutdown frontend fe")).rejects.toThrow(/refusing/);
    expect(await runtimeCommand(inst.adminSock, "show info")).toMatch(/^Name: HAProxy/);
    expect(await masterCommand(inst.masterSock, "show version")).toMatch(/^\d+\.\d+/);
  });

  it("restarts the master after kill -9 and says why", async () => {
    const oldMaster = proc.pid!;
    const oldWorker = (await showProc(inst.masterSock)).workers[0]!.pid;
    process.kill(oldMaster, "SIGKILL");
    const info = await waitFor("the restart callback", async () => restarts[0]);
    // Its config had served: no reason to wait.
    expect(info).toMatchObject({ cause: "master-exited", signal: "SIGKILL", delayMs: 0 });
    expect(info.reason).toMatch(
      new RegExp(`${oldMaster} exited unexpectedly \\(signal SIGKILL\\) after serving \\d+\\.\\d s; restarting now`),
    );
    const status = await waitFor("a new master with a worker", async () => {
      const s = await showProc(inst.masterSock, { timeoutMs: 500 });
      return s.master.pid === proc.pid && s.master.pid !== oldMaster && s.workers.length > 0 ? s : undefined;
    });
    expect(status.master.reloads).toBe(0);
    // Runtime changes die with the worker: the file's config (s1 -> A) serves again.
    await served(inst, "A");
    // The orphaned worker leaves on its own once its master is gone.
    await waitFor("the orphaned worker to exit", async () => (processAlive(oldWorker) ? undefined : true));
  });

  it("stop() ends the master and its workers", async () => {
    const status = await showProc(inst.masterSock);
    const pids = [status.master.pid, ...status.workers.map((w) => w.pid), ...status.oldWorkers.map((w) => w.pid)];
    expect(livePids(inst.cfgPath).sort()).toEqual([...pids].sort());
    await proc.stop();
    expect(proc.running).toBe(false);
    expect(proc.pid).toBeUndefined();
    expect(pids.filter(processAlive)).toEqual([]);
    expect(livePids(inst.cfgPath)).toEqual([]);
    expect(restarts).toHaveLength(1);
  });
});

describe("HaproxyProcess edge cases", () => {
  it("start() rejects, with HAProxy's own message, when the config does not load", async () => {
    const inst = await instance("broken");
    await writeFile(inst.cfgPath, "global\n    nosuchdirective 1\n");
    const restarts: RestartInfo[] = [];
    const proc = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      onRestart: (i) => restarts.push(i),
    });
    await expect(proc.start()).rejects.toThrow(/exited during start-up[\s\S]*unknown keyword 'nosuchdirective'/);
    expect(proc.running).toBe(false);
    expect(restarts).toEqual([]);

    const missing = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      haproxyBin: join(dir, "no-haproxy"),
    });
    await expect(missing.start()).rejects.toThrow(HAPROXY_INSTALL_HINT);
  });

  it("backs off, capped, only while masters keep dying soon after start; a master that served stably is restarted at once", async () => {
    const inst = await instance("flappy");
    await writeFile(inst.cfgPath, config(inst, { s1: a.port }));
    const restarts: RestartInfo[] = [];
    const proc = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      onRestart: (i) => restarts.push(i),
      restartInitialDelayMs: 100,
      restartMaxDelayMs: 400,
      restartStableMs: 1500,
    });
    try {
      await proc.start();
      // Every restart now fails to load: the master exits with code 1 right away.
      await writeFile(inst.cfgPath, "global\n    nosuchdirective 1\n");
      process.kill(proc.pid!, "SIGKILL");
      await waitFor("five restarts", async () => (restarts.length >= 5 ? true : undefined));
      // The first death (soon after start) is restarted at once; the next ones, of masters that never served, back off.
      expect(restarts.slice(0, 5).map((r) => [r.quickCrashes, r.delayMs])).toEqual([
        [1, 0],
        [2, 100],
        [3, 200],
        [4, 400],
        [5, 400],
      ]);
      expect(restarts[1]).toMatchObject({
        code: 1,
        signal: null,
        servedMs: null,
        reason: expect.stringMatching(
          /\(code 1\) before it served \(2 quick crashes in a row: .*\); restarting in 100 ms/,
        ),
      });

      await writeFile(inst.cfgPath, config(inst, { s1: a.port }));
      await served(inst, "A");
      const up = await waitFor("a supervised master with a worker", async () => {
        const s = await showProc(inst.masterSock, { timeoutMs: 500 });
        return s.master.pid === proc.pid && s.workers.length > 0 ? s : undefined;
      });
      await new Promise((r) => setTimeout(r, 1600));
      const before = restarts.length;
      process.kill(up.master.pid, "SIGKILL");
      const again = await waitFor("the restart after a long run", async () => restarts[before]);
      expect(again).toMatchObject({ quickCrashes: 0, delayMs: 0, signal: "SIGKILL" });
      expect(again.servedMs).toBeGreaterThanOrEqual(1500);
      await served(inst, "A");
    } finally {
      await proc.stop();
    }
    expect(livePids(inst.cfgPath)).toEqual([]);
  });

  it("a config that served stably once is known good: masters on it killed 0.5 s apart are each restarted at once; a config reloaded onto is not known good until it serves", async () => {
    const inst = await instance("killed");
    await writeFile(inst.cfgPath, config(inst, { s1: a.port }));
    const restarts: RestartInfo[] = [];
    const recoveries: number[] = [];
    // The shipped policy: 3 s to prove a config, 0.5 s first backoff.
    const proc = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      onRestart: (i) => restarts.push(i),
      onRestarted: (_, r) => recoveries.push(r.downMs),
    });
    const serving = (not: number) =>
      waitFor("a new master with a worker", async () => {
        const s = await showProc(inst.masterSock, { timeoutMs: 500 }).catch(() => undefined);
        return s && s.master.pid === proc.pid && s.master.pid !== not && s.workers.length > 0 ? s : undefined;
      });
    /** Kills the master `times` times, each 0.5 s after the one before. */
    const killEvery500ms = async (times: number) => {
      for (let i = 0; i < times; i++) {
        const t = Date.now();
        const pid = proc.pid!;
        process.kill(pid, "SIGKILL");
        await serving(pid);
        await new Promise((r) => setTimeout(r, Math.max(0, 500 - (Date.now() - t))));
      }
    };
    try {
      await proc.start();
      await new Promise((r) => setTimeout(r, 3200));
      await killEvery500ms(8);
      expect(restarts.map((r) => [r.quickCrashes, r.delayMs])).toEqual(Array(8).fill([0, 0]));
      // No backoff (the delays above are 0); how long each master took to come back is the machine's, not asserted.
      expect(recoveries).toHaveLength(8);
      await served(inst, "A");

      // Another config, reloaded onto and killed before it served 3 s: that may be the config.
      await writeFile(inst.cfgPath, config(inst, { s1: b.port }));
      expect((await proc.reload()).ok).toBe(true);
      restarts.length = 0;
      await killEvery500ms(2);
      expect(restarts.map((r) => [r.quickCrashes, r.delayMs])).toEqual([
        [1, 0],
        [2, 500],
      ]);
      await served(inst, "B");
    } finally {
      await proc.stop();
    }
    expect(livePids(inst.cfgPath)).toEqual([]);
  });

  it("reloads a master left without a worker (its worker ended while an old one drains), which 2.6 does not do by itself", async () => {
    // A backend that never answers keeps a request, and so the old worker, alive after a reload.
    const sockets = new Set<import("node:net").Socket>();
    const silent: Server = createServer(() => undefined);
    silent.on("connection", (s) => sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const inst = await instance("orphaned");
    const slowPort = await freePort();
    await writeFile(
      inst.cfgPath,
      `${config(inst, { s1: a.port })}\nfrontend slow\n    bind 127.0.0.1:${slowPort}\n    timeout server 60s\n    default_backend hang\n\nbackend hang\n    server h 127.0.0.1:${(silent.address() as AddressInfo).port}\n`,
    );
    const restarts: RestartInfo[] = [];
    const recovered: Array<{ configText: string | null; cause: string }> = [];
    const proc = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      onRestart: (i) => restarts.push(i),
      onRestarted: (configText, r) => recovered.push({ configText, cause: r.cause }),
      stopGraceMs: 500,
      killGraceMs: 2000,
    });
    try {
      await proc.start();
      const pending = httpGet(slowPort, "/hang").catch((err: Error) => err);
      await waitFor("the request to reach the backend", async () => (sockets.size > 0 ? true : undefined));
      expect((await proc.reload()).ok).toBe(true);
      const before = await showProc(inst.masterSock);
      expect(before.oldWorkers).toHaveLength(1);
      // A clean exit (SIGTERM) of the current worker: 2.6's master neither exits nor forks another.
      process.kill(before.workers[0]!.pid, "SIGTERM");
      const lost = await waitFor("the supervisor to see the lost worker", async () => restarts[0]);
      expect(lost).toMatchObject({
        cause: "worker-lost",
        delayMs: 0,
        reason: expect.stringContaining("does not fork another by itself; reloading it now"),
      });
      await waitFor("the recovery", async () => recovered[0]);
      expect(recovered[0]).toMatchObject({ cause: "worker-lost", configText: expect.stringContaining("backend hang") });
      const after = await showProc(inst.masterSock);
      expect(after.master.pid).toBe(before.master.pid);
      expect(after.workers).toHaveLength(1);
      expect(after.workers[0]!.pid).not.toBe(before.workers[0]!.pid);
      await served(inst, "A");
      expect(proc.supervision()).toMatchObject({
        restarts: 1,
        lastRestart: { cause: "worker-lost" },
        pendingRestart: null,
      });
      for (const s of sockets) s.destroy();
      await pending;
    } finally {
      await proc.stop();
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
    expect(livePids(inst.cfgPath)).toEqual([]);
  });

  describe("a new worker that dies while the old one drains a request", () => {
    /** HAProxy with a frontend whose backend answers after `ms`, a request in flight to it, and a reload: the old worker drains that request. */
    async function draining(name: string, ms: number, global = "") {
      const slow: Server = createServer((_, res) => setTimeout(() => res.end("slow answer"), ms));
      let reached = false;
      slow.on("connection", () => (reached = true));
      await new Promise<void>((r) => slow.listen(0, "127.0.0.1", r));
      const inst = await instance(name);
      const slowPort = await freePort();
      await writeFile(
        inst.cfgPath,
        `${config(inst, { s1: a.port }, { global: `    hard-stop-after 30s\n${global}`, serverTimeout: "30s" })}\nfrontend slow\n    bind 127.0.0.1:${slowPort}\n    default_backend slow\n\nbackend slow\n    server h 127.0.0.1:${(slow.address() as AddressInfo).port}\n`,
      );
      const restarts: RestartInfo[] = [];
      const lines: string[] = [];
      const proc = new HaproxyProcess({
        configPath: inst.cfgPath,
        masterSocket: inst.masterSock,
        onRestart: (i) => restarts.push(i),
        onOutput: (line) => lines.push(line),
        stopGraceMs: 500,
        killGraceMs: 2000,
      });
      await proc.start();
      const pending = httpGet(slowPort, "/slow").catch((err: Error) => err);
      await waitFor("the request to reach the backend", async () => (reached ? true : undefined));
      expect((await proc.reload()).ok).toBe(true);
      const s = await showProc(inst.masterSock);
      expect(s.oldWorkers).toHaveLength(1);
      return {
        inst,
        proc,
        restarts,
        lines,
        pending,
        oldWorker: s.oldWorkers[0]!.pid,
        newWorker: s.workers[0]!.pid,
        async close() {
          await proc.stop();
          slow.closeAllConnections();
          await new Promise<void>((r) => slow.close(() => r()));
        },
      };
    }

    it("exits cleanly: the master stays, the supervisor forks a new worker beside the old one, and the request completes", async () => {
      const d = await draining("drain-clean", 3000);
      try {
        process.kill(d.newWorker, "SIGTERM");
        await waitFor("the supervisor to see the lost worker", async () => d.restarts[0]);
        expect(d.restarts[0]).toMatchObject({ cause: "worker-lost" });
        await served(d.inst, "A");
        expect(processAlive(d.oldWorker)).toBe(true);
        expect(await d.pending).toEqual({ status: 200, body: "slow answer", headers: expect.anything() });
      } finally {
        await d.close();
      }
    });

    it("is killed: HAProxy 2.6's master ends the old worker itself (exit-on-failure, which no-exit-on-failure does not turn off), so its request is cut; the supervisor restarts the master", async () => {
      const d = await draining("drain-killed", 3000, "    master-worker no-exit-on-failure\n");
      try {
        process.kill(d.newWorker, "SIGKILL");
        await waitFor("the master's exit", async () => d.restarts[0]);
        expect(d.restarts[0]).toMatchObject({ cause: "master-exited" });
        expect(d.lines.join("\n")).toMatch(
          new RegExp(
            `exit-on-failure: killing every process[\\s\\S]*Former worker \\(${d.oldWorker}\\) exited with code 143`,
          ),
        );
        expect(await d.pending).toBeInstanceOf(Error);
        await served(d.inst, "A");
      } finally {
        await d.close();
      }
    });
  });

  it("stop() escalates to SIGTERM when a connection outlives the soft-stop grace", async () => {
    // A backend that never answers keeps a request, and so the worker, busy.
    const sockets = new Set<import("node:net").Socket>();
    const silent: Server = createServer(() => undefined);
    silent.on("connection", (s) => sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const inst = await instance("slow");
    const slowPort = (silent.address() as AddressInfo).port;
    await writeFile(inst.cfgPath, config(inst, { s1: slowPort }, { global: "", serverTimeout: "60s" }));
    const proc = new HaproxyProcess({
      configPath: inst.cfgPath,
      masterSocket: inst.masterSock,
      stopGraceMs: 500,
      killGraceMs: 15_000,
    });
    try {
      await proc.start();
      const pending = httpGet(inst.port, "/hang").catch((err: Error) => err);
      await waitFor("the request to reach the backend", async () => (sockets.size > 0 ? true : undefined));
      const pids = livePids(inst.cfgPath);
      expect(pids.length).toBeGreaterThanOrEqual(2);
      const t0 = Date.now();
      await proc.stop();
      expect(Date.now() - t0).toBeGreaterThanOrEqual(500);
      // SIGTERM ended it: SIGKILL would have waited the 15 s kill grace.
      expect(Date.now() - t0).toBeLessThan(12_000);
      expect(pids.filter(processAlive)).toEqual([]);
      expect(await pending).toBeInstanceOf(Error);
    } finally {
      await proc.stop();
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });
});

describe("runRuntimeCommands re-addresses a slot only once none of its connections is in use", () => {
  let inst: Instance;
  let proc: HaproxyProcess;
  let old: Server;
  let oldPort: number;
  const held: Array<() => void> = [];

  beforeAll(async () => {
    // The previous pod: answers "OLD", holding a request to /hold until released.
    old = createServer((req, res) => {
      const answer = () => res.end(`OLD ${req.url}`);
      if (req.url === "/hold") held.push(answer);
      else answer();
    });
    await new Promise<void>((resolve) => old.listen(0, "127.0.0.1", resolve));
    oldPort = (old.address() as AddressInfo).port;
    inst = await instance("quiet");
    await writeFile(inst.cfgPath, config(inst, { s1: oldPort }));
    proc = new HaproxyProcess({ configPath: inst.cfgPath, masterSocket: inst.masterSock });
    await proc.start();
  });

  afterAll(async () => {
    await proc?.stop();
    old?.closeAllConnections();
    await new Promise<void>((resolve) => (old ? old.close(() => resolve()) : resolve()));
  });

  /** GET on a keep-alive connection of `agent`: HAProxy reuses server connections for it. */
  const keptAlive = (agent: HttpAgent, path: string) =>
    new Promise<string>((resolve, reject) => {
      httpRequest({ host: "127.0.0.1", port: inst.port, path, agent }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve(body.split(" ")[0]!));
      })
        .on("error", reject)
        .end();
    });

  it("waits for the request in flight, then no keep-alive client reaches the previous pod", async () => {
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await keptAlive(agent, "/first")).toBe("OLD");
      const inFlight = keptAlive(agent, "/hold");
      await waitFor("the request held", async () => (held.length === 1 ? true : undefined));
      // The move in place: s2 carries B, s1 leaves service, then s1 gets B's address.
      await runRuntimeCommands(inst.adminSock, [
        addr("s2", "127.0.0.1", b.port),
        stateOf("s2", "ready"),
        stateOf("s1", "drain"),
        stateOf("s1", "maint"),
      ]);
      let moved = false;
      const move = runRuntimeCommands(inst.adminSock, [addr("s1", "127.0.0.1", b.port), stateOf("s1", "ready")]).then(
        () => (moved = true),
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(moved).toBe(false);
      held.shift()!();
      expect(await inFlight).toBe("OLD");
      await move;
      const next: string[] = [];
      for (let i = 0; i < 6; i++) next.push(await keptAlive(agent, `/next${i}`));
      expect(next).toEqual(Array(6).fill("B"));
    } finally {
      agent.destroy();
    }
  });

  it("gives up after its wait with nothing sent, so the caller reloads instead", async () => {
    await runRuntimeCommands(inst.adminSock, [
      stateOf("s2", "drain"),
      stateOf("s2", "maint"),
      addr("s1", "127.0.0.1", oldPort),
    ]);
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      const inFlight = keptAlive(agent, "/hold");
      await waitFor("the request held", async () => (held.length === 1 ? true : undefined));
      await runRuntimeCommands(inst.adminSock, [stateOf("s1", "drain"), stateOf("s1", "maint")]);
      const err = await runRuntimeCommands(inst.adminSock, [addr("s1", "127.0.0.1", b.port), stateOf("s1", "ready")], {
        quietTimeoutMs: 200,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RuntimeCommandsError);
      expect(err).toMatchObject({ tookEffect: 0, unknown: false });
      expect((err as Error).message).toMatch(/be\/s1 still has 1 connection\(s\) in use to its previous address/);
      expect((await showStat(inst.adminSock)).find((r) => r.pxname === "be" && r.svname === "s1")?.addr).toBe(
        `127.0.0.1:${oldPort}`,
      );
      held.shift()!();
      expect(await inFlight).toBe("OLD");
    } finally {
      agent.destroy();
    }
  });
});
