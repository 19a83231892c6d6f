import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import { KubeApiEmulator } from "../../shared/dev/kube-api-emulator.js";
import { list, service, slice } from "../support/fixtures.js";
import { DEV_BUILD } from "../support/dev-build.js";
import { freePort, httpGet, waitFor } from "../support/net.js";

// The demo backends run in a process forked from their own module, which Node runs only compiled:
// the development build's (npm run build:dev).
const { DemoCluster } = (await import(
  join(DEV_BUILD, "shared", "dev", "demo-cluster.js")
)) as typeof import("../../shared/dev/demo-cluster.js");
const { DemoBackends } = (await import(
  join(DEV_BUILD, "shared", "dev", "demo-backends.js")
)) as typeof import("../../shared/dev/demo-backends.js");

/** The pid of this process's demo backends child, if one runs. */
function backendsPid(): number | undefined {
  const out = spawnSync("pgrep", ["-P", String(process.pid), "-f", "demo-backends"], { encoding: "utf8" }).stdout;
  const pid = Number(out.trim().split("\n")[0]);
  return pid > 0 ? pid : undefined;
}

describe("DemoCluster", () => {
  let dir = "";
  let stop = async () => undefined as unknown;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "demo-cluster-"));
  });
  afterEach(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reports each load of the file to the stage trace, with what it wrote and removed", async () => {
    const api = await new KubeApiEmulator().start();
    const file = join(dir, "cluster.json");
    const events: Array<[string, Record<string, unknown> | undefined]> = [];
    const demo = new DemoCluster(file, api, createLogger("test", "silent"), (ev, fields) => events.push([ev, fields]));
    stop = async () => {
      await demo.stop();
      await api.stop();
    };
    // Endpoints off loopback: no demo backend is started.
    const web = [service("web", [{ port: 80 }]), slice("web", [{ port: 8080 }], ["10.0.0.1"])];
    writeFileSync(file, JSON.stringify(list(web)));
    await demo.load();
    writeFileSync(file, JSON.stringify(list(web.slice(0, 1))));
    await demo.load();
    expect(events).toEqual([
      ["load.start", undefined],
      ["load.end", { written: 2, removed: 0 }],
      ["load.start", undefined],
      ["load.end", { written: 0, removed: 1 }],
    ]);
  });

  it("survives a slice port that is no port: warns, starts no backend for it, and serves the rest and later edits", async () => {
    const api = await new KubeApiEmulator().start();
    const file = join(dir, "cluster.json");
    const records: Array<{ level: number; msg: string; address?: string; port?: unknown }> = [];
    const log = pino({ level: "debug" }, { write: (line: string) => records.push(JSON.parse(line)) });
    const demo = new DemoCluster(file, api, log);
    stop = async () => {
      await demo.stop();
      await api.stop();
    };
    const [good, later] = [await freePort(), await freePort()];
    const typo = [
      ...[-5, 0, 1.5, 70_000].map((port, i) => slice(`typo${i}`, [{ port }], ["127.0.0.1"])),
      // Fields of the wrong shape: nothing to serve, nothing thrown.
      { ...slice("shape", [{ port: 1 }], ["127.0.0.1"]), endpoints: "oops", ports: 5 },
      { kind: "Endpoints", metadata: { name: "shape" }, subsets: [null, { addresses: {}, ports: [null] }] },
    ];
    writeFileSync(file, JSON.stringify(list([...typo, slice("web", [{ port: good }], ["127.0.0.1"])])));
    await demo.load();
    expect((await httpGet(good, "/x")).body).toBe(`demo backend 127.0.0.1:${good} answered GET /x\n`);
    const warned = records.filter((r) => r.level === 40);
    expect(warned.map((r) => r.port)).toEqual([-5, 0, 1.5, 70_000]);
    expect(warned[0]!.msg).toMatch(/is no port/);

    writeFileSync(
      file,
      JSON.stringify(
        list([...typo, slice("web", [{ port: good }], ["127.0.0.1"]), slice("api", [{ port: later }], ["127.0.0.1"])]),
      ),
    );
    await demo.load();
    expect((await httpGet(later, "/y")).body).toBe(`demo backend 127.0.0.1:${later} answered GET /y\n`);
    expect((await httpGet(good, "/x")).status).toBe(200);
  });

  it("serves on when the backends' process dies: it is started again at once, with every backend", async () => {
    const api = await new KubeApiEmulator().start();
    const file = join(dir, "cluster.json");
    const demo = new DemoCluster(file, api, createLogger("test", "silent"));
    stop = async () => {
      await demo.stop();
      await api.stop();
    };
    const [good, later] = [await freePort(), await freePort()];
    writeFileSync(file, JSON.stringify(list([slice("web", [{ port: good }], ["127.0.0.1"])])));
    await demo.load();
    const pid = backendsPid()!;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, "SIGKILL");
    await waitFor("the backend served again", async () => {
      const again = backendsPid();
      return again !== undefined && again !== pid && (await httpGet(good, "/x").catch(() => undefined))?.status === 200
        ? true
        : undefined;
    });
    writeFileSync(
      file,
      JSON.stringify(
        list([slice("web", [{ port: good }], ["127.0.0.1"]), slice("api", [{ port: later }], ["127.0.0.1"])]),
      ),
    );
    await demo.load();
    expect(backendsPid()).not.toBe(pid);
    expect((await httpGet(later, "/y")).status).toBe(200);
    expect((await httpGet(good, "/x")).status).toBe(200);
  });

  it("DemoBackends answers an address it cannot listen on with the error, and goes on serving", async () => {
    const backends = new DemoBackends(createLogger("test", "silent"));
    stop = () => backends.stop();
    expect((await backends.start("127.0.0.1", -5)).error).toMatch(/ERR_SOCKET_BAD_PORT|options\.port/);
    const port = await freePort();
    expect(await backends.start("127.0.0.1", port)).toEqual({ id: expect.any(Number) });
    expect((await httpGet(port, "/z")).status).toBe(200);
  });
});
