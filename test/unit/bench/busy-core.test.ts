import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import {
  type BusyCore,
  busyCoreFromArgs,
  cpuTimeMs,
  describeBusyCore,
  startBusyCore,
} from "../../../bench/busy-core.js";

const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
};

describe("busy core", () => {
  let busy: BusyCore | null = null;
  afterEach(async () => {
    await busy?.stop();
    busy = null;
  });

  it("spins: its process uses CPU time, and stops when asked", async () => {
    busy = startBusyCore(null);
    // On a loaded machine the spin may start late: wait for a tenth of a second of its CPU time.
    for (let waited = 0; cpuTimeMs(busy.pid) < 100 && waited < 10_000; waited += 50)
      await new Promise((r) => setTimeout(r, 50));
    expect(cpuTimeMs(busy.pid)).toBeGreaterThanOrEqual(100);
    expect(busy.share()).toBeGreaterThan(0);
    const pid = busy.pid;
    await busy.stop();
    expect(alive(pid)).toBe(false);
    // The share is frozen at the stop, not diluted by time after it.
    const share = busy.share();
    await new Promise((r) => setTimeout(r, 200));
    expect(busy.share()).toBe(share);
  });

  it("pinned, the kernel lets it run on that CPU only", async () => {
    busy = startBusyCore(0);
    await new Promise((r) => setTimeout(r, 300));
    expect(/^Cpus_allowed_list:\s+(\S+)$/m.exec(readFileSync(`/proc/${busy.pid}/status`, "utf8"))?.[1]).toBe("0");
    expect(describeBusyCore(busy)).toMatch(/pinned to CPU 0 \(it got \d\.\d\d of a core\)/);
  });

  it("comes from the flags: none, placed by the scheduler, or pinned", async () => {
    expect(busyCoreFromArgs(["node", "bench"])).toBeNull();
    expect(describeBusyCore(null)).toBe("no busy-loop process beside it");
    busy = busyCoreFromArgs(["node", "bench", "--busy-core"]);
    expect(busy?.cpu).toBeNull();
    await busy?.stop();
    busy = busyCoreFromArgs(["node", "bench", "--busy-core-pin", "0"]);
    expect(busy?.cpu).toBe(0);
    expect(() => busyCoreFromArgs(["node", "bench", "--busy-core-pin", "x"])).toThrow(/CPU number/);
  });
});
