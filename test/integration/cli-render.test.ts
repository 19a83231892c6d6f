import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRenderOptions } from "../../shared/core/settings/options.js";
import { RenderContext } from "../../shared/app/render-context.js";
import { parseSnapshot } from "../../shared/core/kubernetes/snapshot.js";
import { TestKubeApi } from "../support/kube-api.js";
import { service, slice } from "../support/fixtures.js";
import { requireHaproxy } from "../support/haproxy.js";

const root = join(import.meta.dirname, "..", "..");
const bin = join(root, "bin", "servicelb.js");
const demo = join(root, "examples", "cluster.yaml");

/** Runs the installed CLI (bin/servicelb.js → dist/), as a user would after `npm ci`. */
function cli(args: string[], opts: { input?: string; env?: Record<string, string> } = {}) {
  const r = spawnSync(process.execPath, [bin, ...args], {
    encoding: "utf8",
    input: opts.input,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", LOG_LEVEL: "silent", ...opts.env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The same, without blocking this process: needed when this process also serves the fake API. */
function cliAsync(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", LOG_LEVEL: "silent" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("servicelb render", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "servicelb-cli-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("prints the config for a snapshot file, identical to the library's render", () => {
    const r = cli(["render", "--snapshot", demo]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const expected = new RenderContext(parseRenderOptions({})).render(parseSnapshot(readFileSync(demo, "utf8"))).config;
    expect(r.stdout).toBe(expected);
  });

  it("reads the snapshot from stdin and prints JSON with warnings, revision and stats", () => {
    const r = cli(["render", "--snapshot", "-", "--format", "json", "--http-port", "8080"], {
      input: readFileSync(demo, "utf8"),
    });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.revision).toBe("1000");
    expect(out.config).toContain("bind *:8080");
    expect(out.warnings).toEqual([]);
    expect(out.stats).toMatchObject({ services: 2, backends: 2, servers: 2 });
  });

  it("takes options from SERVICELB_* variables and a config file, flags winning", () => {
    const cfg = join(dir, "options.yaml");
    writeFileSync(cfg, "httpPort: 8081\nstatsPort: 9999\n");
    const r = cli(["render", "--snapshot", demo, "--config", cfg, "--stats-port", "9998"], {
      env: { SERVICELB_HTTP_PORT: "8082" },
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("bind *:8082");
    expect(r.stdout).toContain("bind 127.0.0.1:9998");
  });

  it("reports invalid annotations on stderr and still renders", () => {
    const snap = JSON.stringify({
      kind: "List",
      items: [
        service("x", [{ port: 80 }], { annotations: { "serviceloadbalancer/lb.host": "bad host" } }),
        slice("x", [{ port: 80 }], ["10.0.0.1"]),
      ],
    });
    const r = cli(["render", "--snapshot", "-"], { input: snap });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('warning: default/x serviceloadbalancer/lb.host: "bad host" is not a host name');
    expect(r.stdout).not.toContain("bad host");
  });

  it.each([
    [["render", "--snapshot", demo, "--balance-algorithm", "uri"], "--balance-algorithm"],
    [["render", "--snapshot", demo, "--ssl-ca-cert", "/ca.pem"], "--ssl-ca-cert needs --ssl-cert"],
    [["render", "--snapshot", demo, "--no-such-flag"], "unknown option"],
    [
      ["render", "--snapshot", "/does/not/exist.yaml"],
      "servicelb: --snapshot: cannot read /does/not/exist.yaml: ENOENT",
    ],
    [["render", "--snapshot", "-"], "not a Kubernetes object"],
    [["render", "--snapshot", demo, "--format", "xml"], "xml"],
  ])("exits 2 with a message and no stdout on bad input: %j", (args, needle) => {
    const r = cli(args, { input: "[1]" });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(needle);
  });

  it("--check validates with haproxy -c and exits 1 when HAProxy rejects the result", () => {
    requireHaproxy();
    expect(cli(["render", "--snapshot", demo, "--check"]).code).toBe(0);
    const missingCert = cli(["render", "--snapshot", demo, "--check", "--ssl-cert", join(dir, "missing.pem")]);
    expect(missingCert.code).toBe(1);
    expect(missingCert.stdout).toBe("");
    expect(missingCert.stderr).toContain("haproxy -c rejected the rendered config");
    expect(missingCert.stderr).toContain("missing.pem");
  });
});

describe("servicelb render against a live cluster", () => {
  let api: TestKubeApi;
  let kubeconfig: string;
  beforeAll(async () => {
    api = await new TestKubeApi().start();
    api.upsert("Service", service("web", [{ port: 80, name: "http" }]));
    api.upsert("EndpointSlice", slice("web", [{ name: "http", port: 8080 }], ["10.0.0.7"]));
    kubeconfig = await api.writeKubeconfig();
  });
  afterAll(async () => api?.stop());

  it("lists the cluster through the kubeconfig and renders what the snapshot would give", async () => {
    const live = await cliAsync(["render", "--kubeconfig", kubeconfig, "--format", "json"]);
    expect(live.stderr).toBe("");
    expect(live.code).toBe(0);
    const out = JSON.parse(live.stdout);
    expect(out.config).toMatch(/^ {4}server s\d+ 10\.0\.0\.7:8080$/m);
    expect(Number(out.revision)).toBeGreaterThan(0);
  });

  it("exits 1 with the API server's reason when it fails", async () => {
    api.failNext({ status: 500, times: 10 });
    const r = await cliAsync(["render", "--kubeconfig", kubeconfig]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(/500/);
  });
});
