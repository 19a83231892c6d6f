import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { requireHaproxy } from "../support/haproxy.js";
import { freePort, waitFor } from "../support/net.js";
import { LOCAL_STACK_ENTRY } from "../support/dev-build.js";
import { echoBackend } from "../support/net.js";
import { createObjectStore } from "../../shared/adapters/store.js";
import { S3RVER_CREDENTIALS } from "../support/s3.js";

/*
 * `npm start -- --nodes 3`: three agents, each with its own HAProxy on its own loopback address,
 * running the one config the reconcile function publishes, and a change that needs a reload
 * rolled out to the canary first, then to the others.
 */

const root = join(import.meta.dirname, "..", "..");
const NODES = ["node-1", "node-2", "node-3"];
const ADDRESSES = ["127.0.1.1", "127.0.1.2", "127.0.1.3"];

/** GET with a Host header through the HAProxy at host:port, one connection per request. */
function get(host: string, port: number, hostHeader: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: "/", headers: { host: hostHeader }, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error(`GET / on ${host}:${port} timed out`)));
    req.end();
  });
}

describe("npm start -- --nodes 3", () => {
  const dir = mkdtempSync(join(tmpdir(), "servicelb-nodes-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("runs three agents, each with its own HAProxy on its own address from one published config, and rolls a change out to the canary first", async () => {
    requireHaproxy();
    const [httpPort, statsPort] = [await freePort(), await freePort()];
    const api = await echoBackend("api");
    const file = join(dir, "cluster.yaml");
    const cluster = readFileSync(join(root, "examples", "cluster.yaml"), "utf8").replaceAll("18182", String(api.port));
    writeFileSync(file, cluster);
    const data = join(dir, "data");
    const stack = spawn(
      process.execPath,
      [
        LOCAL_STACK_ENTRY,
        ...["--demo", "--nodes", "3", "--cluster-file", file, "--data-dir", data],
        ...["--http-port", String(httpPort), "--stats-port", String(statsPort), "--resync", "1000"],
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        // Short waves, judged from a few requests: the test sends them.
        env: { ...process.env, SERVICELB_CANARY_BAKE_MS: "2000", SERVICELB_CANARY_MIN_REQUESTS: "5" },
      },
    );
    let out = "";
    let err = "";
    stack.stdout.on("data", (c: Buffer) => (out += c.toString()));
    stack.stderr.on("data", (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) => stack.on("exit", (code) => resolve(code)));
    let sending = true;
    try {
      await waitFor(
        "the stack's summary",
        async () => (out.includes("Ctrl-C stops everything.") ? true : undefined),
        60_000,
      );
      const canaryLine = out.split("\n").find((l) => l.includes("(canary)"));
      const canary = NODES.find((n) => canaryLine?.includes(n))!;
      for (const [i, node] of NODES.entries())
        expect(out).toMatch(
          new RegExp(`${node}.* http://${ADDRESSES[i]!.replaceAll(".", "\\.")}:${httpPort}/ {3}stats`),
        );
      // Each node's own HAProxy answers on its own address, all from the same bytes.
      for (const address of ADDRESSES) expect((await get(address, httpPort, "api.example.com")).body).toBe("api /");
      const configs = NODES.map((n) => readFileSync(join(data, n, "haproxy", "haproxy.cfg"), "utf8"));
      expect(new Set(configs).size).toBe(1);
      expect(configs[0]).toContain('bind "${SERVICELB_NODE_ADDRESS}":');

      // The function's first pass made the config every node runs the rollouts' stable one, and
      // every node reported running it: the waves are made of the nodes whose reports say they
      // serve (a first report, written before the node's first apply, does not count it in).
      const endpoint = /s3rver at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
      const store = createObjectStore({
        url: "s3://servicelb/local",
        endpoint,
        forcePathStyle: true,
        credentials: S3RVER_CREDENTIALS,
      });
      try {
        await waitFor(
          "every node reporting the stable config",
          async () => {
            const record = await store.getRollout();
            const reports = (await store.listStatuses()) as Array<{ applied: { key: string } | null }>;
            return record !== null &&
              record.rollout === null &&
              reports.length === NODES.length &&
              reports.every((r) => r.applied?.key === record.stable.key)
              ? true
              : undefined;
          },
          20_000,
        );

        // Traffic for the gates, through every node.
        const load = (async () => {
          while (sending) {
            await Promise.all(ADDRESSES.map((a) => get(a, httpPort, "api.example.com").catch(() => undefined)));
            await new Promise((r) => setTimeout(r, 50));
          }
        })();
        writeFileSync(
          file,
          cluster.replace(
            "serviceloadbalancer/lb.host: api.example.com",
            "serviceloadbalancer/lb.host: api.example.com\n        serviceloadbalancer/lb.timeout-server: 7s",
          ),
        );
        const changedAt: Record<string, number> = {};
        // The rollout as its record says while it runs: its order, and when each wave started.
        let order: string[] = [];
        const waveStarts: number[] = [];
        await waitFor(
          "every node on the change",
          async () => {
            const r = (await store.getRollout())?.rollout;
            if (r?.state === "rolling") {
              if (order.length === 0) order = r.order;
              waveStarts[r.wave] ??= Date.parse(r.waveStartedAt);
            }
            for (const n of NODES)
              if (readFileSync(join(data, n, "haproxy", "haproxy.cfg"), "utf8").includes("timeout server 7s"))
                changedAt[n] ??= Date.now();
            return Object.keys(changedAt).length === NODES.length ? true : undefined;
          },
          60_000,
        );
        sending = false;
        await load;
        // The labelled canary leads the rollout's order, the only node of its first wave; the
        // second wave started once the first had baked (2 s), and the others took the change
        // after it started and after the canary had.
        expect(order).toHaveLength(NODES.length);
        expect(order[0]).toBe(canary);
        expect(waveStarts[1]! - waveStarts[0]!).toBeGreaterThanOrEqual(2000);
        for (const n of NODES.filter((n) => n !== canary)) {
          expect(changedAt[n]!).toBeGreaterThanOrEqual(changedAt[canary]!);
          expect(changedAt[n]!).toBeGreaterThanOrEqual(waveStarts[1]!);
        }
      } finally {
        store.close();
      }
      for (const address of ADDRESSES) expect((await get(address, httpPort, "api.example.com")).body).toBe("api /");
    } catch (e) {
      // The rollout's own log lines first: a failed order check is read from them.
      const rollout = err
        .split("\n")
        .filter((l) => l.includes('"msg":"rollout: ') || l.includes('"msg":"config applied"'));
      throw new Error(
        `${(e as Error).message}\n--- stdout\n${out}\n--- rollout\n${rollout.join("\n")}\n--- stderr\n${err.slice(-4000)}`,
      );
    } finally {
      sending = false;
      stack.kill("SIGINT");
      await exited;
      await api.close();
    }
    // Every HAProxy stopped with the stack.
    for (const address of ADDRESSES) await expect(get(address, httpPort, "api.example.com")).rejects.toThrow();
  }, 120_000);
});
