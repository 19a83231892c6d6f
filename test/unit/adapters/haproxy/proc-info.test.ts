import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { isHaproxy, openFileLimit, processAlive } from "../../../../shared/adapters/haproxy/proc-info.js";

describe("what /proc says of a process", () => {
  it("a running process is alive and, being node, not HAProxy", () => {
    expect(processAlive(process.pid)).toBe(true);
    expect(isHaproxy(process.pid)).toBe(false);
  });

  it("a process that has exited is neither alive nor HAProxy", () => {
    const { pid } = spawnSync(process.execPath, ["-e", ""]);
    expect(processAlive(pid!)).toBe(false);
    expect(isHaproxy(pid!)).toBe(false);
  });

  it("reads the hard open-file limit, as `ulimit -Hn` says it", () => {
    const hard = spawnSync("sh", ["-c", "ulimit -Hn"], { encoding: "utf8" }).stdout.trim();
    expect(openFileLimit("self")).toBe(/^\d+$/.test(hard) ? Number(hard) : null);
  });
});
