import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { freePort } from "../support/net.js";

// `servicelb serve-render`, the dry run over HTTP of docs/operations.md, as an operator starts it.

const root = join(import.meta.dirname, "..", "..");
const bin = join(root, "bin", "servicelb.js");
const linux = process.platform === "linux";

function start(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [bin, "serve-render", ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: "/nonexistent-home", LOG_LEVEL: "silent", ...env },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  return { child, exited, out: () => stdout, err: () => stderr };
}

describe("servicelb serve-render", () => {
  it("names a taken port, and what holds it, in one line and exits 1", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const port = (holder.address() as AddressInfo).port;
    try {
      const run = start(["--port", String(port)]);
      expect(await run.exited).toBe(1);
      const by = linux ? ` by pid ${process.pid} \\(.+\\)` : "";
      expect(run.err()).toMatch(
        new RegExp(
          `^servicelb serve-render: port ${port} \\(--port\\) is in use${by}: stop it, or pass --port with a free port\\n$`,
        ),
      );
      expect(run.out()).toBe("");
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  });

  it("refuses a port that is not a number with exit code 2", async () => {
    const run = start(["--port", "http"]);
    expect(await run.exited).toBe(2);
    expect(run.err()).toBe('servicelb: --port: "http" is not a port number (1-65535)\n');
  });

  it("refuses bad SERVICELB_* settings, as the function would, with exit code 2", async () => {
    const run = start(["--port", String(await freePort())], { SERVICELB_BALANCE_ALGORITHM: "fastest" });
    expect(await run.exited).toBe(2);
    expect(run.err()).toMatch(/^servicelb: --balance-algorithm: .*"roundrobin"/);
  });

  it("serves the render function until SIGTERM", async () => {
    const port = await freePort();
    const run = start(["--port", String(port)]);
    while (!run.out().includes("\n")) {
      if (run.child.exitCode !== null) throw new Error(`exited early: ${run.err()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(run.out()).toBe(
      `render function: http://localhost:${port}/ (POST a snapshot, GET the live cluster, GET /metrics)\n`,
    );
    const res = await fetch(`http://127.0.0.1:${port}/?format=json`, {
      method: "POST",
      headers: { "content-type": "application/yaml" },
      body: readFileSync(join(root, "examples", "cluster.yaml")),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { config: string }).config).toMatch(/^backend /m);
    // A body the framework cannot parse gets the JSON error, not Express's HTML page.
    const bad = await fetch(`http://127.0.0.1:${port}/`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{",
    });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toMatch(/^application\/json/);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });
});
