import * as functions from "@google-cloud/functions-framework";
import { getTestServer } from "@google-cloud/functions-framework/testing";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import { loadFunctionSettings } from "../../shared/app/function-options.js";
import { createRenderHandler } from "../../shared/app/render-http.js";
import { RenderContext } from "../../shared/app/render-context.js";
import { parseSnapshot } from "../../shared/core/kubernetes/snapshot.js";
import { TestKubeApi } from "../support/kube-api.js";
import { service, slice } from "../support/fixtures.js";
import { requireHaproxy } from "../support/haproxy.js";

const demo = readFileSync(join(import.meta.dirname, "..", "..", "examples", "cluster.yaml"), "utf8");

describe("HTTP function render (dry run)", () => {
  let api: TestKubeApi;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    api = await new TestKubeApi().start();
    api.upsert("Service", service("web", [{ port: 80, name: "http" }]));
    api.upsert("EndpointSlice", slice("web", [{ name: "http", port: 8080 }], ["10.0.0.7"]));
    const kubeconfig = await api.writeKubeconfig();
    const settings = loadFunctionSettings({
      SERVICELB_KUBECONFIG: kubeconfig,
      SERVICELB_MAX_BODY_BYTES: "65536",
      SERVICELB_STATS_USER: "admin",
    });
    functions.http("render", createRenderHandler(settings, createLogger("render", "silent")));
    server = getTestServer("render");
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await api?.stop();
  });

  it("POST a YAML snapshot: the config as text, the same bytes the CLI and reconcile render", async () => {
    const r = await fetch(`${base}/`, { method: "POST", body: demo, headers: { "content-type": "application/yaml" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/plain/);
    const settings = loadFunctionSettings({ SERVICELB_STATS_USER: "admin" });
    expect(await r.text()).toBe(new RenderContext(settings.options).render(parseSnapshot(demo)).config);
  });

  it("POST a JSON snapshot with ?format=json: warnings, skipped, revision and stats", async () => {
    const body = JSON.stringify({
      kind: "List",
      metadata: { resourceVersion: "77" },
      items: [
        service("x", [{ port: 80 }], { annotations: { "serviceloadbalancer/lb.algorithm": "magic" } }),
        service("y", [{ port: 80 }], { type: "LoadBalancer" }),
      ],
    });
    const r = await fetch(`${base}/?format=json`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
    });
    expect(r.status).toBe(200);
    const out = (await r.json()) as {
      revision: string;
      warnings: Array<{ service: string }>;
      skipped: Array<{ reason: string }>;
    };
    expect(out.revision).toBe("77");
    expect(out.warnings[0]!.service).toBe("default/x");
    expect(out.skipped.map((s) => s.reason)).toEqual(["type LoadBalancer: it has a load balancer already"]);
  });

  it("never puts the stats password in the output, only a reference HAProxy resolves on the node", async () => {
    process.env.SERVICELB_STATS_PASSWORD = "s3cret-in-the-function-env";
    try {
      const text = await (
        await fetch(`${base}/`, { method: "POST", body: demo, headers: { "content-type": "text/plain" } })
      ).text();
      expect(text).toContain('user admin insecure-password "${SERVICELB_STATS_PASSWORD}"');
      expect(text).not.toContain("s3cret-in-the-function-env");
    } finally {
      delete process.env.SERVICELB_STATS_PASSWORD;
    }
  });

  it("?check=1 runs haproxy -c on the result: 200 when it passes, 422 with HAProxy's reason when not, 501 without HAProxy", async () => {
    requireHaproxy();
    const r = await fetch(`${base}/?check=1`, {
      method: "POST",
      body: demo,
      headers: { "content-type": "text/plain" },
    });
    expect(r.status).toBe(200);
    // A certificate path that does not exist on this machine: the config renders, HAProxy refuses it.
    functions.http(
      "render-missing-cert",
      createRenderHandler(
        loadFunctionSettings({ SERVICELB_SSL_CERT: "/nonexistent/lb.pem" }),
        createLogger("render", "silent"),
      ),
    );
    const other = getTestServer("render-missing-cert");
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}/?check=1`;
    const answer = async () => {
      const r = await fetch(url, { method: "POST", body: demo, headers: { "content-type": "text/plain" } });
      return { statusCode: r.status, body: await r.text() };
    };
    const refused = await answer();
    expect(refused.statusCode).toBe(422);
    expect(JSON.parse(refused.body).error).toContain("/nonexistent/lb.pem");
    const path = process.env.PATH;
    process.env.PATH = "/nonexistent";
    try {
      const noHaproxy = await answer();
      expect(noHaproxy.statusCode).toBe(501);
      expect(JSON.parse(noHaproxy.body).error).toContain("apt-get install -y haproxy");
    } finally {
      process.env.PATH = path;
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it("?format=files: the files `render --out` writes, by path, which HAProxy loads", async () => {
    requireHaproxy();
    const snapshot = readFileSync(join(import.meta.dirname, "..", "golden", "settings.yaml"), "utf8");
    const r = await fetch(`${base}/?format=files`, {
      method: "POST",
      body: snapshot,
      headers: { "content-type": "application/yaml" },
    });
    expect(r.status).toBe(200);
    const { files } = (await r.json()) as { files: Record<string, string> };
    const config = new RenderContext(loadFunctionSettings({ SERVICELB_STATS_USER: "admin" }).options).render(
      parseSnapshot(snapshot),
    ).config;
    expect(files["haproxy.cfg"]).toBe(config);
    const paths = Object.keys(files);
    // The route maps (domains, hosts, paths) and the Service of each backend (backends.map).
    expect(paths.filter((p) => p.startsWith("maps/")).sort()).toEqual([
      "maps/backends.map",
      "maps/http.domains.map",
      "maps/http.hosts.map",
      "maps/http.paths.map",
    ]);
    expect(paths.some((p) => p.startsWith("patterns/"))).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), "servicelb-files-"));
    try {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), text);
      }
      const check = spawnSync("haproxy", ["-c", "-f", join(dir, "haproxy.cfg")], {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "", SERVICELB_STATS_PASSWORD: "secret" },
      });
      expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("GET renders the live cluster", async () => {
    const r = await fetch(`${base}/?format=json`);
    expect(r.status).toBe(200);
    const out = (await r.json()) as { config: string };
    expect(out.config).toMatch(/^ {4}server s\d+ 10\.0\.0\.7:8080$/m);
  });

  it("GET /metrics: the live cluster's warnings for Prometheus, each refused claim with its owner", async () => {
    const host = { "serviceloadbalancer/lb.host": "api.example.com" };
    const owner = api.upsert(
      "Service",
      service("api", [{ port: 80 }], { namespace: "shop", annotations: host, created: "2024-01-01T00:00:00Z" }),
    );
    const intruder = api.upsert(
      "Service",
      service("evil", [{ port: 80 }], { namespace: "aaa", annotations: host, created: "2025-01-01T00:00:00Z" }),
    );
    try {
      const r = await fetch(`${base}/metrics`);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
      const text = await r.text();
      expect(text).toContain(
        'servicelb_route_claims_refused{service="aaa/evil",annotation="serviceloadbalancer/lb.host",owner="shop/api"} 1\n',
      );
      expect(text).toContain('servicelb_render_warnings{kind="claim"} 1\n');
      expect(text).toContain('servicelb_render_warnings{kind="annotation"} 0\n');
    } finally {
      api.remove("Service", owner.metadata.namespace as string, owner.metadata.name as string);
      api.remove("Service", intruder.metadata.namespace as string, intruder.metadata.name as string);
    }
  });

  it("GET without any kubeconfig on the server: 501 saying what the server needs, and that a POST works", async () => {
    const saved = {
      HOME: process.env.HOME,
      KUBECONFIG: process.env.KUBECONFIG,
      KUBERNETES_SERVICE_HOST: process.env.KUBERNETES_SERVICE_HOST,
    };
    const home = mkdtempSync(join(tmpdir(), "servicelb-home-"));
    process.env.HOME = home;
    delete process.env.KUBECONFIG;
    delete process.env.KUBERNETES_SERVICE_HOST;
    functions.http(
      "render-without-cluster",
      createRenderHandler(loadFunctionSettings({}), createLogger("render", "silent")),
    );
    const bare = getTestServer("render-without-cluster");
    try {
      await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
      const r = await fetch(`http://127.0.0.1:${(bare.address() as AddressInfo).port}/`);
      expect(r.status).toBe(501);
      const { error } = (await r.json()) as { error: string };
      expect(error).toBe(
        `GET renders the live cluster, and this server has no kubeconfig (it looked in $KUBECONFIG, ${home}/.kube/config and for an in-cluster service account): set SERVICELB_KUBECONFIG in its environment, or POST a snapshot (kubectl get services,endpointslices -A -o json)`,
      );
    } finally {
      await new Promise((resolve) => bare.close(resolve));
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("GET answers 503 with the reason when the API server fails", async () => {
    api.failNext({ status: 503, times: 4 });
    const r = await fetch(`${base}/`);
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: string }).error).toMatch(/503/);
  });

  it.each([
    ["{not json", "text/plain", "not valid JSON"],
    ["kind: Pod", "application/yaml", 'kind "Pod"'],
    ["", "text/plain", "empty body"],
  ])("POST %j → 400 with a JSON error", async (body, type, needle) => {
    const r = await fetch(`${base}/`, { method: "POST", body, headers: { "content-type": type } });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toContain(needle);
  });

  it("POST malformed JSON as application/json → 400", async () => {
    const r = await fetch(`${base}/`, {
      method: "POST",
      body: "{nope",
      headers: { "content-type": "application/json" },
    });
    expect(r.status).toBe(400);
  });

  it("a body over SERVICELB_MAX_BODY_BYTES → 413", async () => {
    const r = await fetch(`${base}/`, {
      method: "POST",
      body: "x".repeat(70_000),
      headers: { "content-type": "text/plain" },
    });
    expect(r.status).toBe(413);
  });

  it("other methods → 405 with Allow", async () => {
    const r = await fetch(`${base}/`, { method: "DELETE" });
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("GET, POST");
  });
});
