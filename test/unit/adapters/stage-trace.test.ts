import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fileTracer, tracerFromEnv } from "../../../shared/adapters/stage-trace.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function traceFile(): string {
  const dir = mkdtempSync(join(tmpdir(), "stage-trace-"));
  dirs.push(dir);
  return join(dir, "trace.ndjson");
}

const lines = (file: string) =>
  readFileSync(file, "utf8")
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe("stage trace", () => {
  it("appends one JSON line per event: wall-clock time, the process part, the event and its fields", () => {
    const file = traceFile();
    const before = Date.now();
    const tracer = fileTracer(file);
    tracer("agent")("pull.end", { key: "k1", via: "ping" });
    tracer("bridge")("event");
    const [first, second] = lines(file);
    expect(first).toMatchObject({ proc: "agent", ev: "pull.end", key: "k1", via: "ping" });
    expect(second).toMatchObject({ proc: "bridge", ev: "event" });
    // Wall-clock time, from the monotonic clock's origin: it drifts from Date.now() by a few
    // milliseconds over a process's life (a full run saw 1.4 ms), never by a second.
    expect(Math.abs((first!.at as number) - before)).toBeLessThan(1000);
    expect(second!.at).toBeGreaterThanOrEqual(first!.at as number);
  });

  it("never throws into what it measures, even when the file cannot be written", () => {
    expect(() => fileTracer("/nonexistent-dir/trace.ndjson")("agent")("pull.start")).not.toThrow();
  });

  it("is wired from SERVICELB_TRACE_FILE only when it names a file", () => {
    expect(tracerFromEnv({})).toBeUndefined();
    expect(tracerFromEnv({ SERVICELB_TRACE_FILE: "" })).toBeUndefined();
    const file = traceFile();
    tracerFromEnv({ SERVICELB_TRACE_FILE: file })!("reconcile")("pass.start", { n: 1 });
    expect(lines(file)).toMatchObject([{ proc: "reconcile", ev: "pass.start", n: 1 }]);
  });
});
