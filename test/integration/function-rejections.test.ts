import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../support/net.js";

/**
 * Requests functions-framework refuses while reading them, before the function runs, sent to the
 * deployed bundles under the real framework (as the images and the local stack run them).
 */
const root = join(import.meta.dirname, "..", "..");
const main = join(root, "node_modules", "@google-cloud", "functions-framework", "build", "src", "main.js");

interface Served {
  url: string;
  stderr: () => string;
  stop(): Promise<void>;
}

async function serve(target: string, signature: string, env: Record<string, string>): Promise<Served> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [
      main,
      "--source",
      join(root, "dist", "bundle", `${target}.mjs`),
      "--target",
      target,
      "--signature-type",
      signature,
      "--port",
      String(port),
    ],
    {
      env: { PATH: process.env.PATH, NODE_ENV: "development", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const url = `http://127.0.0.1:${port}/`;
  await waitFor(
    `${target} under functions-framework`,
    async () => ((await fetch(url, { method: "OPTIONS" })).status > 0 ? true : undefined),
    20_000,
  );
  return {
    url,
    stderr: () => stderr,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Settings reconcile starts with; nothing may reach the store. */
const UNREACHABLE_STORE = {
  SERVICELB_STORE: "s3://unused",
  SERVICELB_STORE_ENDPOINT: "http://127.0.0.1:9",
  SERVICELB_STORE_PATH_STYLE: "true",
};

/** The first line of `served`'s log after `from` characters that has `text` in it, parsed. */
async function loggedLine(served: Served, from: number, text: string): Promise<Record<string, unknown>> {
  const line = await waitFor(`a log line with ${JSON.stringify(text)}`, async () =>
    served
      .stderr()
      .slice(from)
      .split("\n")
      .find((l) => l.includes(text)),
  );
  return JSON.parse(line) as Record<string, unknown>;
}

// Any of these in an answer would be the framework's HTML error page, or internals.
const internals = /<html|<pre>|node_modules|\bat [\w.<>]+ \(|SyntaxError|TypeError/i;

describe("the render function answers what the framework cannot parse with a JSON error", () => {
  let render: Served;
  beforeAll(async () => {
    // NODE_ENV=development: Express's page would carry the stack trace there.
    render = await serve("render", "http", { LOG_LEVEL: "silent" });
  });
  afterAll(() => render?.stop());

  it.each([
    ["application/json", {}, "{nope", 400],
    ["application/json", {}, "null", 400],
    ["application/cloudevents+json", {}, "{nope", 400],
    ["application/json; charset=bogus", {}, "{}", 415],
    ["text/plain; charset=bogus", {}, "kind: List", 415],
    ["application/json", { "content-encoding": "gzip" }, "not gzip", 400],
    ["application/yaml", { "content-encoding": "bogus" }, "kind: List", 415],
    ["application/x-www-form-urlencoded", {}, "a=1&b=2", 400],
    ["multipart/form-data; boundary=x", {}, "--x\r\n\r\nhello\r\n--x--", 400],
  ])("POST %s %j %j → %i, JSON, no internals", async (type, headers, body, status) => {
    const r = await fetch(render.url, { method: "POST", headers: { "content-type": type, ...headers }, body });
    const text = await r.text();
    expect(r.status).toBe(status);
    expect(r.headers.get("content-type")).toMatch(/^application\/json\b/);
    expect(JSON.parse(text)).toEqual({ error: expect.any(String) });
    expect(text).not.toMatch(internals);
  });
});

describe("the reconcile function acknowledges deliveries the framework cannot read", () => {
  let reconcile: Served;
  beforeAll(async () => {
    // Nothing here reaches the store or the cluster: the function never runs.
    reconcile = await serve("reconcile", "cloudevent", UNREACHABLE_STORE);
  });
  afterAll(() => reconcile?.stop());

  const binary = {
    "ce-specversion": "1.0",
    "ce-id": "p1",
    "ce-type": "dev.knative.sources.ping",
    "ce-source": "/apis/v1/namespaces/servicelb/pingsources/resync",
  };

  it.each([
    ["a binary event whose data is text", { ...binary, "content-type": "text/plain" }, "not json"],
    ["a PingSource without data (binary, no content type, no body)", binary, undefined],
    ["an empty POST with no headers", {}, undefined],
    ["a null body", { "content-type": "application/json" }, "null"],
    [
      "a structured event with invalid JSON",
      { "content-type": "application/cloudevents+json" },
      '{"specversion": "1.0", "id": ',
    ],
  ])("%s: 204, and a warning with the reason", async (_, headers, body) => {
    const before = reconcile.stderr().length;
    const r = await fetch(reconcile.url, { method: "POST", headers, body });
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    expect(await loggedLine(reconcile, before, "event ignored: not understood")).toMatchObject({
      level: 40,
      verdict: "malformed",
      reason: expect.any(String),
    });
  });

  it("a GET delivers nothing: 405, as JSON", async () => {
    const r = await fetch(reconcile.url);
    expect(r.status).toBe(405);
    expect(await r.json()).toEqual({ error: "GET delivers no event: POST one" });
  });
});

describe("the reconcile function's events reach its pipeline on the worker thread", () => {
  let reconcile: Served;
  beforeAll(async () => {
    // No cluster to list (no kubeconfig, not in a pod): a pass fails, an ignored event does not.
    reconcile = await serve("reconcile", "cloudevent", { ...UNREACHABLE_STORE, KUBERNETES_SERVICE_HOST: "" });
  });
  afterAll(() => reconcile?.stop());

  const post = (type: string) =>
    fetch(reconcile.url, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", id: `e-${type}`, type, source: "test", data: {} }),
    });

  it("answers an event the pipeline ignores 204, and a pass that fails 500, and goes on serving", async () => {
    const before = reconcile.stderr().length;
    expect((await post("dev.example.unknown")).status).toBe(204);
    expect(await loggedLine(reconcile, before, "event ignored: not understood")).toMatchObject({
      name: "reconcile",
      eventType: "dev.example.unknown",
      verdict: "unknown",
    });

    const failed = await post("dev.knative.sources.ping");
    expect(failed.status).toBe(500);
    expect(await failed.text()).not.toMatch(/<html/i);
    expect((await post("dev.example.unknown")).status).toBe(204);
  });

  // JSON.parse takes any depth, a structured clone (the event's way to the worker) does not.
  const deep = (levels: number) => `${'{"a":'.repeat(levels)}{}${"}".repeat(levels)}`;

  it.each([
    [
      "structured",
      "deep-s",
      { "content-type": "application/cloudevents+json" },
      `{"specversion":"1.0","id":"deep-s","type":"dev.knative.apiserver.resource.update","source":"test","data":${deep(5000)}}`,
    ],
    [
      "binary",
      "deep-b",
      {
        "content-type": "application/json",
        "ce-specversion": "1.0",
        "ce-id": "deep-b",
        "ce-type": "dev.knative.apiserver.resource.update",
        "ce-source": "test",
      },
      deep(5000),
    ],
  ])(
    "ignores a %s event whose data nests 5,000 levels deep: 204 and a warning, not 500",
    async (_, id, headers, body) => {
      const before = reconcile.stderr().length;
      const r = await fetch(reconcile.url, { method: "POST", headers, body });
      expect(r.status).toBe(204);
      // By its id: the line of an event sent before may still be on its way to stderr.
      expect(await loggedLine(reconcile, before, `"eventId":"${id}"`)).toMatchObject({
        level: 40,
        msg: "event ignored: not understood",
        verdict: "malformed",
        reason: expect.stringContaining("not a Kubernetes object"),
      });
      expect(reconcile.stderr().slice(before)).not.toMatch(/call stack/);
    },
  );
});
