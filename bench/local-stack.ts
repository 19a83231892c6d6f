/*
 * The local stack (`npm start`) in a process of its own, for the benches that drive it from
 * outside as a cluster's users would: through the Kubernetes API emulator, and HAProxy's port.
 */

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

export interface Stack {
  agentUrl: string;
  reconcileUrl: string;
  s3Endpoint: string;
  /** Writes to the Kubernetes API emulator, as kubectl sends them. */
  apiWrite(method: "POST" | "PUT" | "DELETE", path: string, body?: unknown): Promise<void>;
  stop(): Promise<void>;
}

export interface StackOptions {
  /** servicelb's own delivery, or a peer's (bench/delivery-policy.ts). */
  policy: string;
  clusterFile: string;
  dataDir: string;
  httpPort: number;
  statsPort: number;
  /** Further `npm start` flags. */
  flags?: readonly string[];
  env?: Readonly<Record<string, string>>;
  /** Resolves once the stack serves what the cluster file holds. */
  ready(): Promise<boolean>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const stack = spawn(
    process.execPath,
    [
      fileURLToPath(new URL("e2e-stack.js", import.meta.url)),
      o.policy,
      "--demo",
      "--cluster-file",
      o.clusterFile,
      "--data-dir",
      o.dataDir,
      "--http-port",
      String(o.httpPort),
      "--stats-port",
      String(o.statsPort),
      ...(o.flags ?? []),
    ],
    { stdio: ["ignore", "pipe", "ignore"], env: { ...process.env, ...o.env } },
  );
  let out = "";
  stack.stdout.on("data", (c: Buffer) => (out += c.toString()));
  const stop = async () => {
    if (stack.exitCode !== null) return;
    stack.kill("SIGINT");
    await new Promise((r) => stack.once("exit", r));
  };
  try {
    await waitUntil("the stack", async () => out.includes("Ctrl-C stops everything."));
    await waitUntil("the first config served", o.ready);
  } catch (err) {
    await stop();
    throw err;
  }
  const kubeconfig = parse(readFileSync(join(o.dataDir, "kubeconfig"), "utf8")) as {
    clusters: Array<{ cluster: { server: string } }>;
    users: Array<{ user: { token: string } }>;
  };
  const server = kubeconfig.clusters[0]!.cluster.server;
  const token = kubeconfig.users[0]!.user.token;
  return {
    agentUrl: /agent (http:\/\/127\.0\.0\.1:\d+)\/status/.exec(out)![1]!,
    reconcileUrl: /reconcile\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)![1]!,
    s3Endpoint: /s3rver at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!,
    async apiWrite(method, path, body) {
      const r = await fetch(server + path, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (!r.ok) throw new Error(`${method} ${path}: HTTP ${r.status} ${await r.text()}`);
      await r.arrayBuffer();
    },
    stop,
  };
}
