import { describe, expect, it } from "vitest";
import { consoleFormat, createConsole, formatRecord } from "../../../shared/dev/console-log.js";

function capture(format: "human" | "json", level = "info") {
  const lines: string[] = [];
  return { lines, console: createConsole(format, (t) => lines.push(t), level) };
}

describe("the local stack's console", () => {
  it("is human on a terminal and JSON otherwise, unless --log-format says", () => {
    expect(consoleFormat(undefined, true)).toBe("human");
    expect(consoleFormat(undefined, false)).toBe("json");
    expect(consoleFormat("json", true)).toBe("json");
    expect(consoleFormat("human", false)).toBe("human");
  });

  it("prints a child's record whole, however long, with its name and level", () => {
    const { lines, console } = capture("human");
    const warnings = Array.from({ length: 12 }, (_, i) => ({
      service: `default/svc-${i}`,
      annotation: "serviceloadbalancer/lb.host",
      message: `ignored: "bad host ${i}" is not a host name`,
    }));
    console.relay(
      "reconcile",
      JSON.stringify({
        level: 40,
        time: Date.UTC(2026, 0, 1, 12, 0, 1),
        pid: 1,
        hostname: "h",
        name: "reconcile",
        msg: "render warnings",
        revision: "42",
        count: 12,
        warnings,
      }),
    );
    const text = lines.join("");
    expect(text.length).toBeGreaterThan(440);
    expect(text.split("\n")[0]).toBe("12:00:01 [reconcile] WARN render warnings  revision=42 count=12");
    for (let i = 0; i < 12; i++)
      expect(text).toContain(
        `- service=default/svc-${i} annotation=serviceloadbalancer/lb.host message="ignored: \\"bad host ${i}\\" is not a host name"`,
      );
  });

  it("keeps the lines of multi-line text and error messages instead of \\n escapes", () => {
    const out = formatRecord({
      level: 50,
      time: 0,
      name: "agent",
      msg: "haproxy -c refused the config",
      output: "[ALERT] line 3\n  bind :80\n  ^",
      err: { type: "Error", message: "first\nsecond", stack: "Error: first\nsecond\n    at f (file.ts:1:2)" },
    });
    expect(out).not.toContain("\\n");
    expect(out.split("\n")).toEqual([
      "00:00:00 [agent] ERROR haproxy -c refused the config  err=first",
      "    output:",
      "        [ALERT] line 3",
      "          bind :80",
      "          ^",
      "    second",
      "    at f (file.ts:1:2)",
      "",
    ]);
  });

  it("shows a warning's error by its message alone: a transient failure needs no stack", () => {
    const out = formatRecord({
      level: 40,
      time: 0,
      name: "reconcile",
      msg: "reconcile failed",
      err: {
        type: "ClusterError",
        message: "cannot reach the API server",
        stack: "ClusterError: cannot reach\n    at hv (reconcile.mjs:325:19461)",
      },
    });
    expect(out).toBe('00:00:00 [reconcile] WARN reconcile failed  err="cannot reach the API server"\n');
  });

  it("passes records through unchanged as JSON, wraps plain text, and honours the level", () => {
    const { lines, console } = capture("json", "info");
    const rec = { level: 30, time: 1, name: "agent", msg: "agent started", url: "http://127.0.0.1:1" };
    console.relay("agent", JSON.stringify(rec));
    console.relay("render", "Serving function...");
    console.relay("agent", JSON.stringify({ ...rec, level: 20, msg: "chatter" }));
    console.log.warn({ port: 8080 }, "own record");
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed[0]).toEqual(rec);
    expect(parsed[1]).toMatchObject({ level: 30, name: "render", msg: "Serving function..." });
    expect(parsed).toHaveLength(3);
    expect(parsed[2]).toMatchObject({ level: 40, name: "local", msg: "own record", port: 8080 });
  });

  it("names the node an agent's record came from when several agents log under one name", () => {
    const { lines, console } = capture("json", "info");
    const rec = { level: 30, time: 1, name: "agent", msg: "config applied", how: "reload" };
    console.relay("node-2", JSON.stringify(rec));
    console.relay("agent", JSON.stringify(rec));
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed[0]).toEqual({ ...rec, name: "node-2/agent" });
    expect(parsed[1]).toEqual(rec);
    const human = capture("human", "info");
    human.console.relay("node-2", JSON.stringify(rec));
    expect(human.lines.join("")).toBe("00:00:00 [node-2/agent] config applied  how=reload\n");
  });
});
