import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import { DemoCluster } from "../../shared/dev/demo-cluster.js";
import { KubeApiEmulator } from "../../shared/dev/kube-api-emulator.js";
import { list, service, slice } from "../support/fixtures.js";

describe("DemoCluster", () => {
  const dir = mkdtempSync(join(tmpdir(), "demo-cluster-"));
  let stop = async () => undefined as unknown;
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
});
