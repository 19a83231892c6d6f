import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { requireHaproxy } from "../support/haproxy.js";
import { freePort, httpGet, waitFor } from "../support/net.js";
import { LOCAL_STACK_ENTRY } from "../support/dev-build.js";

const root = join(import.meta.dirname, "..", "..");

function cluster(webPort: number, apiPort: number): string {
  return readFileSync(join(root, "examples", "cluster.yaml"), "utf8")
    .replaceAll("18181", String(webPort))
    .replaceAll("18182", String(apiPort));
}

function listening(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, host);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** The local stack as `npm start` runs it; resolves once it printed its summary. */
async function startStack(args: string[]) {
  const stack = spawn(process.execPath, [LOCAL_STACK_ENTRY, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  stack.stdout.on("data", (c: Buffer) => (out += c.toString()));
  stack.stderr.on("data", (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => stack.on("exit", (code) => resolve(code)));
  const output = () => `--- stdout\n${out}\n--- stderr\n${err.slice(-4000)}`;
  try {
    await waitFor(
      "the stack's summary",
      async () => (out.includes("Ctrl-C stops everything.") ? true : undefined),
      60_000,
    );
  } catch (e) {
    stack.kill("SIGKILL");
    throw new Error(`${(e as Error).message}\n${output()}`);
  }
  return { stack, exited, output, err: () => err };
}

describe("npm start (the local stack)", () => {
  const dir = mkdtempSync(join(tmpdir(), "servicelb-local-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("serves an edit made while it was stopped within seconds of starting again on the same data dir", async () => {
    requireHaproxy();
    const [httpPort, statsPort, web1, web2, api] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const file = join(dir, "restart-cluster.yaml");
    const data = join(dir, "restart-data");
    const args = [
      "--demo",
      "--cluster-file",
      file,
      "--data-dir",
      data,
      "--http-port",
      String(httpPort),
      "--stats-port",
      String(statsPort),
      "--resync",
      "5000",
    ];
    writeFileSync(file, cluster(web1, api));

    const first = await startStack(args);
    try {
      await waitFor(
        "the demo Service",
        async () => ((await httpGet(httpPort, "/web/hello")).body.includes(`127.0.0.1:${web1}`) ? true : undefined),
        30_000,
      );
      // A few edits, so that the first run's cluster revision is well past where a fresh start begins.
      for (const host of ["127.0.0.3", "127.0.0.4", "127.0.0.5"]) {
        writeFileSync(file, cluster(web1, api).replace("addresses: [127.0.0.1]", `addresses: [${host}]`));
        await waitFor(
          `the edit to ${host}`,
          async () => ((await httpGet(httpPort, "/web/x")).body.includes(`${host}:${web1}`) ? true : undefined),
          15_000,
        );
      }
    } finally {
      first.stack.kill("SIGINT");
    }
    expect(await first.exited).toBe(0);

    // Edited while stopped: the pod moved to another address and port.
    writeFileSync(file, cluster(web2, api).replace("addresses: [127.0.0.1]", "addresses: [127.0.0.2]"));
    const started = Date.now();
    const second = await startStack(args);
    try {
      await waitFor(
        "the edit made while stopped",
        async () => ((await httpGet(httpPort, "/web/again")).body.includes(`127.0.0.2:${web2}`) ? true : undefined),
        20_000,
      );
      expect(Date.now() - started).toBeLessThan(30_000);
      // Logged once the pass ends, which may be after the agent applied what it published.
      await waitFor("the new epoch logged", async () =>
        /published into epoch 1: the cluster's revisions went back/.test(second.err()) ? true : undefined,
      );
    } catch (e) {
      second.stack.kill("SIGKILL");
      throw new Error(`${(e as Error).message}\n${second.output()}`);
    }
    second.stack.kill("SIGINT");
    expect(await second.exited).toBe(0);
  });

  it("survives a typo in the cluster file: an endpoint port of -5 and a name with a newline are warned about, and the next edit is served", async () => {
    requireHaproxy();
    const [httpPort, statsPort, web1, web2, api] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const file = join(dir, "typo-cluster.yaml");
    writeFileSync(file, cluster(web1, api));
    const { stack, exited, output, err } = await startStack([
      "--demo",
      "--cluster-file",
      file,
      "--data-dir",
      join(dir, "typo-data"),
      "--http-port",
      String(httpPort),
      "--stats-port",
      String(statsPort),
      "--resync",
      "5000",
    ]);
    const typos = `  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: { name: web-typo, namespace: default, labels: { kubernetes.io/service-name: web } }
    addressType: IPv4
    ports: [{ name: http, port: -5, protocol: TCP }]
    endpoints:
      - addresses: [127.0.0.1]
  - apiVersion: v1
    kind: Service
    metadata: { name: "new\\nline", namespace: default }
    spec: { clusterIP: 10.96.0.77, ports: [{ port: 80 }] }
`;
    try {
      await waitFor(
        "the demo Service",
        async () => ((await httpGet(httpPort, "/web/hello")).body.includes(`127.0.0.1:${web1}`) ? true : undefined),
        30_000,
      );
      writeFileSync(file, `${cluster(web1, api)}${typos}`);
      await waitFor(
        "the warning about the port",
        async () => (err().includes("an endpoint port is no port") ? true : undefined),
        15_000,
      );
      // The Service with a newline in its name reached the function as an event, which refused it.
      await waitFor(
        "the function's word on the named Service",
        async () => (err().includes("new\\nline") ? true : undefined),
        15_000,
      );
      expect(err()).not.toMatch(/invalid header value|ERR_IPC_CHANNEL_CLOSED|reconcile unreachable/);

      // Still serving, and the next edit (a backend on another port) is served.
      expect((await httpGet(httpPort, "/web/still")).body).toContain(`127.0.0.1:${web1}`);
      writeFileSync(file, `${cluster(web2, api).replace("addresses: [127.0.0.1]", "addresses: [127.0.0.2]")}${typos}`);
      await waitFor(
        "the next edit to be served",
        async () => ((await httpGet(httpPort, "/web/again")).body.includes(`127.0.0.2:${web2}`) ? true : undefined),
        15_000,
      );
      expect(stack.exitCode).toBeNull();
    } catch (e) {
      stack.kill("SIGKILL");
      throw new Error(`${(e as Error).message}\n${output()}`);
    }
    stack.kill("SIGINT");
    expect(await exited).toBe(0);
  });

  it("serves the demo cluster through HAProxy, follows edits of the cluster file, and stops every process", async () => {
    requireHaproxy();
    const [httpPort, statsPort, web1, web2, api] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const file = join(dir, "cluster.yaml");
    writeFileSync(file, cluster(web1, api));
    const data = join(dir, "data");
    const stack = spawn(
      process.execPath,
      [
        LOCAL_STACK_ENTRY,
        "--demo",
        "--cluster-file",
        file,
        "--data-dir",
        data,
        "--http-port",
        String(httpPort),
        "--stats-port",
        String(statsPort),
        "--resync",
        "5000",
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let err = "";
    stack.stdout.on("data", (c: Buffer) => (out += c.toString()));
    stack.stderr.on("data", (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) => stack.on("exit", (code) => resolve(code)));
    try {
      await waitFor(
        "the stack's summary",
        async () => (out.includes("Ctrl-C stops everything.") ? true : undefined),
        60_000,
      );
      const ports = [...out.matchAll(/http:\/\/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]));
      expect(ports).toContain(httpPort);

      const first = await waitFor(
        "the demo Service through HAProxy",
        async () => {
          const r = await httpGet(httpPort, "/web/hello");
          return r.status === 200 ? r : undefined;
        },
        30_000,
      );
      expect(first.body).toBe(`demo backend 127.0.0.1:${web1} answered GET /hello\n`);
      expect((await httpGet(httpPort, "/", { host: "api.example.com" })).body).toBe(
        `demo backend 127.0.0.1:${api} answered GET /\n`,
      );

      // Move the web pod to another address and port (any 127/8 address is loopback): a new endpoint for the same Service.
      writeFileSync(file, cluster(web2, api).replace("addresses: [127.0.0.1]", "addresses: [127.0.0.2]"));
      await waitFor(
        "the edited endpoint to be served",
        async () => {
          const r = await httpGet(httpPort, "/web/again");
          return r.body.includes(`127.0.0.2:${web2}`) ? r : undefined;
        },
        15_000,
      );

      // A Service in another namespace claims the demo's host: the owner keeps it, the console names both
      // (in JSON records: stderr is not a terminal here).
      const hijack = `  - apiVersion: v1
    kind: Service
    metadata: { name: evil, namespace: aaa, annotations: { serviceloadbalancer/lb.host: api.example.com } }
    spec: { clusterIP: 10.96.0.66, ports: [{ name: http, port: 80, targetPort: 80 }] }
`;
      writeFileSync(file, `${cluster(web2, api).replace("addresses: [127.0.0.1]", "addresses: [127.0.0.2]")}${hijack}`);
      const warning = await waitFor(
        "the refused claim in the console",
        async () =>
          err
            .split("\n")
            .find(
              (l) =>
                l.includes('"level":40,') &&
                l.includes('"name":"reconcile"') &&
                l.includes('"msg":"render warnings"') &&
                l.includes('"service":"aaa/evil"'),
            ),
        15_000,
      );
      expect(warning).toContain('"owner":"shop/api"');
      // Served as soon as its backend is: no endpoint, so 503.
      await waitFor(
        "the intruder at its own path",
        async () => ((await httpGet(httpPort, "/aaa/evil/")).status === 503 ? true : undefined),
        15_000,
      );
      expect((await httpGet(httpPort, "/", { host: "api.example.com" })).body).toBe(
        `demo backend 127.0.0.1:${api} answered GET /\n`,
      );

      stack.kill("SIGINT");
      expect(await exited).toBe(0);
      for (const p of new Set(ports)) expect(await listening(p)).toBe(false);
      expect(await listening(web2, "127.0.0.2")).toBe(false);
      expect(spawnSync("pgrep", ["-f", data], { encoding: "utf8" }).stdout.trim()).toBe("");
    } catch (e) {
      stack.kill("SIGKILL");
      throw new Error(`${(e as Error).message}\n--- stdout\n${out}\n--- stderr\n${err.slice(-4000)}`);
    }
  });

  it("serves examples/gateway.yaml: its HTTPRoutes through HAProxy on the Gateway's port", async () => {
    requireHaproxy();
    const [httpPort, statsPort, listener, v1, v2] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const file = join(dir, "gateway.yaml");
    writeFileSync(
      file,
      readFileSync(join(root, "examples", "gateway.yaml"), "utf8")
        .replace("port: 8081", `port: ${listener}`)
        .replace("port: 18191", `port: ${v1}`)
        .replace("port: 18192", `port: ${v2}`),
    );
    const args = ["--demo", "--cluster-file", file, "--data-dir", join(dir, "gateway-data")];
    const started = await startStack([...args, "--http-port", String(httpPort), "--stats-port", String(statsPort)]);
    try {
      const cart = await waitFor(
        "the shop route",
        async () => {
          const r = await httpGet(listener, "/cart", { host: "shop.example.com" });
          return r.status === 200 ? r.body : undefined;
        },
        30_000,
      );
      expect([
        `demo backend 127.0.0.1:${v1} answered GET /cart\n`,
        `demo backend 127.0.0.1:${v2} answered GET /cart\n`,
      ]).toContain(cart);
      const old = await httpGet(listener, "/old", { host: "shop.example.com" });
      expect(old.status).toBe(301);
      expect(old.headers.location).toBe(`http://www.example.com:${listener}/old`);
      expect((await httpGet(listener, "/", { host: "shop.example.com", version: "two" })).body).toBe(
        `demo backend 127.0.0.1:${v2} answered GET /\n`,
      );
      expect((await httpGet(listener, "/", { host: "other.example" })).status).toBe(404);
    } catch (e) {
      started.stack.kill("SIGKILL");
      throw new Error(`${(e as Error).message}\n${started.output()}`);
    }
    started.stack.kill("SIGINT");
    expect(await started.exited).toBe(0);
  });
});
