import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createObjectStore, type ObjectStore } from "../../shared/adapters/store.js";
import { LOCAL_STACK_ENTRY } from "../support/dev-build.js";
import { dripProxy } from "../support/drip.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

// The CLI as an operator or a script meets it: exit codes, what stderr says, --version.

const root = join(import.meta.dirname, "..", "..");
const bin = join(root, "bin", "servicelb.js");
const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };

/** Runs the installed CLI with a bare environment (no kubeconfig, no AWS notice switch): what a user's shell has. */
function cli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: "/nonexistent-home", LOG_LEVEL: "silent", ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

let s3: TestS3;
let store: ObjectStore;
let storeArgs: string[];
const credentials = {
  AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
};

beforeAll(async () => {
  s3 = await startS3();
  const url = `s3://${s3.bucket}/operator`;
  storeArgs = ["--store", url, "--store-endpoint", s3.endpoint, "--store-path-style"];
  store = createObjectStore({ url, endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
});

afterAll(async () => {
  store.close();
  await s3.stop();
});

const report = (node: string, key: string | null, running = true) => ({
  node,
  applied:
    key === null
      ? null
      : { key, sha256: "b".repeat(64), revision: "1", appliedAt: new Date().toISOString(), how: "reload" },
  lastError: null,
  backoff: null,
  haproxy: { running },
  reportIntervalSeconds: 60,
  reportedAt: new Date().toISOString(),
  agent: `servicelb/${version}`,
});

describe("servicelb status", () => {
  it("exits 3 while a node is behind or its HAProxy is down, 0 once every node serves the newest config", async () => {
    const { key } = await store.publish({ config: "global\n", revision: "100", generator: "servicelb/test" });
    await store.putStatus("node-a", report("node-a", key));
    await store.putStatus("node-b", report("node-b", null));
    let r = await cli(["status", "--format", "json", ...storeArgs], credentials);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout).nodes.map((n: { node: string; behind: boolean }) => [n.node, n.behind])).toEqual([
      ["node-a", false],
      ["node-b", true],
    ]);
    expect(r.stderr).toContain("not converged: node-b: behind the newest config");

    await store.putStatus("node-b", report("node-b", key, false));
    r = await cli(["status", ...storeArgs], credentials);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("node-b: HAProxy down");

    await store.putStatus("node-b", report("node-b", key));
    r = await cli(["status", "--format", "json", ...storeArgs], credentials);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  });

  it("exits 3 while the reconcile function's last recorded pass failed, though every node runs the newest config", async () => {
    const { key } = await store.publish({ config: "global\n", revision: "100", generator: "servicelb/test" });
    for (const node of ["node-a", "node-b"]) await store.putStatus(node, report(node, key));
    const failure = {
      since: "2026-12-01T10:00:00.000Z",
      passes: 4,
      stage: "publish",
      message: "S3 put of s3://b/operator/configs/x.cfg failed: Access Denied (AccessDenied, HTTP 403)",
      transient: false,
      eventId: "e-4",
    };
    await store.putPassRecord({ at: "2026-12-01T10:03:00.000Z", generator: `servicelb/${version}`, failure });
    let r = await cli(["status", "--nodes", ...storeArgs], credentials);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain(
      "function: FAILING: 4 passes failed since 2026-12-01T10:00:00.000Z, the last at 2026-12-01T10:03:00.000Z at publish: S3 put",
    );
    expect(r.stdout).toContain("nodes: 2: 2 current, 0 behind, 0 down; 0 pinned\n");
    expect(r.stdout).toMatch(/^node-a\s+1\s+current\s/m);
    expect(r.stderr).toContain("servicelb: not converged: function: 4 passes failed since");

    await store.putPassRecord({ at: "2026-12-01T10:04:00.000Z", generator: `servicelb/${version}`, failure: null });
    r = await cli(["status", ...storeArgs], credentials);
    expect(r.stdout).toContain("function: last pass 2026-12-01T10:04:00.000Z succeeded");
    expect(r.code).toBe(0);
  });
});

describe("servicelb status on a store that fails some reads", () => {
  it("counts a node whose report cannot be read (503 after every retry), or is no report, as unknown: exit 3, every other node shown", async () => {
    const proxy = await dripProxy(s3.endpoint);
    const url = `s3://${s3.bucket}/operator-unread`;
    const own = createObjectStore({
      url,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
    });
    try {
      const { key } = await own.publish({ config: "global\n", revision: "7", generator: "servicelb/test" });
      for (const node of ["node-a", "node-b", "node-c"]) await own.putStatus(node, report(node, key));
      await own.putStatus("node-d", { hello: "not a report" });
      proxy.refuseStatus = 503;
      proxy.mode = (req) => (req.method === "GET" && req.url?.endsWith("/status/node-b.json") ? "refuse" : "pass");
      const args = ["--store", url, "--store-endpoint", proxy.endpoint, "--store-path-style"];

      let r = await cli(["status", "--format", "json", ...args], credentials);
      expect(r.code).toBe(3);
      const fleet = JSON.parse(r.stdout);
      expect(fleet.summary).toMatchObject({ nodes: 4, current: 2, behind: 0, down: 0, unknown: 2 });
      expect(fleet.nodes.map((n: { node: string }) => n.node)).toEqual(["node-a", "node-c"]);
      expect(fleet.unread).toEqual([{ node: "node-b", error: expect.stringContaining("HTTP 503") }]);
      expect(r.stderr).toContain("not converged: node-b: report cannot be read: ");
      expect(r.stderr).toContain('not converged: a status report that is not one: {"hello":"not a report"}');

      r = await cli(["status", ...args], credentials);
      expect(r.code).toBe(3);
      expect(r.stdout).toContain("nodes: 4: 2 current, 0 behind, 0 down, 2 unknown; 0 pinned\n");
      expect(r.stdout).toContain("unread status report: node-b: ");

      // Every record read again: only the one that is no report keeps the fleet from converging.
      proxy.mode = () => "pass";
      r = await cli(["status", "--format", "json", ...args], credentials);
      expect(r.code).toBe(3);
      expect(JSON.parse(r.stdout).summary).toMatchObject({ nodes: 4, current: 3, unknown: 1 });
    } finally {
      own.close();
      await proxy.stop();
    }
  });
});

describe("servicelb errors", () => {
  it("names --store when no store is given", async () => {
    for (const command of ["history", "status"]) {
      const r = await cli([command]);
      expect(r.code, command).toBe(2);
      expect(r.stderr, command).toContain("--store / SERVICELB_STORE is required");
    }
  });

  it("names the flag of a file that does not exist, exit 2", async () => {
    let r = await cli(["render", "--snapshot", join(root, "examples/cluster.yaml"), "--template", "/nope.liquid"]);
    expect([r.code, r.stdout]).toEqual([2, ""]);
    expect(r.stderr).toBe("servicelb: --template / SERVICELB_TEMPLATE: /nope.liquid does not exist\n");
    r = await cli(["render", "--kubeconfig", "/nonexistent"]);
    expect([r.code, r.stdout]).toEqual([2, ""]);
    expect(r.stderr).toBe("servicelb: --kubeconfig / SERVICELB_KUBECONFIG: /nonexistent does not exist\n");
  });

  it("says that no kubeconfig was found, and how to pass one", async () => {
    const r = await cli(["render"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^servicelb: no kubeconfig found \(looked in \$KUBECONFIG, \/nonexistent-home\/\.kube\/config and for an in-cluster service account\): pass --kubeconfig FILE/,
    );
  });

  it("prints no AWS SDK notice about Node versions", async () => {
    const r = await cli(["history", ...storeArgs], credentials);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/NodeVersionSupportWarning|AWS SDK/);
  });
});

describe("servicelb --version", () => {
  it("prints the package's version on every command", async () => {
    for (const command of [[], ["render"], ["history"], ["diff"], ["status"], ["reconcile"], ["agent"]]) {
      const r = await cli([...command, "--version"]);
      expect([r.code, r.stdout, r.stderr], command.join(" ")).toEqual([0, `${version}\n`, ""]);
    }
  });
});

describe("the local stack's flags (npm start --)", () => {
  const local = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [LOCAL_STACK_ENTRY, ...args], { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
      p.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      p.on("exit", (code) => resolve({ code, stdout, stderr }));
    });

  it("prints the version, and exits 2 on a bad flag before anything starts", async () => {
    expect(await local(["--version"])).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
    const bad = await local(["--http-port", "0"]);
    expect([bad.code, bad.stdout, bad.stderr]).toEqual([2, "", "servicelb: --http-port: 0 is not a port\n"]);
  });

  it("is not a command of the shipped CLI: the local stack is development only", async () => {
    const r = await cli(["local"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown command 'local'");
  });
});
