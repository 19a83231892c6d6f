import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { startEventBridge } from "../../shared/dev/event-bridge.js";
import { KubeApiEmulator } from "../../shared/dev/kube-api-emulator.js";
import { freePort, waitFor } from "../support/net.js";

/** A reconcile function stand-in that counts the CloudEvents it is sent, by type. */
async function sink(): Promise<{ url: string; types: string[]; server: Server }> {
  const types: string[] = [];
  const server = createServer((req, res) => {
    types.push(String(req.headers["ce-type"]));
    req.resume();
    req.on("end", () => res.writeHead(204).end());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, types, server };
}

function kubeconfig(port: number, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "u", token }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

function recorder() {
  const records: Array<{ level: number; msg: string }> = [];
  const log = pino(
    { level: "debug" },
    { write: (line: string) => records.push(JSON.parse(line) as { level: number; msg: string }) },
  );
  return { records, log };
}

describe("the local event bridge with a cluster that does not answer", () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  it("says so in one line, sends no resync while it is down, and resyncs once it answers", async () => {
    const port = await freePort();
    const api = new KubeApiEmulator();
    const s = await sink();
    cleanup.push(() => new Promise((r) => s.server.close(r)));
    const { records, log } = recorder();
    const stop = startEventBridge({ kc: kubeconfig(port, api.token), sink: s.url, resyncMs: 300, log });
    cleanup.push(stop);

    // Four watch retries per watch (0.5 s, 1 s, 2 s backoff) and ten resync periods.
    await new Promise((r) => setTimeout(r, 3500));
    const warnings = records.filter((r) => r.level >= 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain(`cannot reach the API server at http://127.0.0.1:${port}`);
    expect(warnings[0]!.msg).toContain("ECONNREFUSED");
    expect(warnings[0]!.msg).toContain("Nothing is reconciled until it answers; retrying with backoff");
    expect(warnings[0]!.msg).not.toMatch(/\n\s+at /);
    expect(s.types).toEqual([]);

    await api.start(port);
    cleanup.push(() => api.stop());
    await waitFor(
      "a resync once the API server answers",
      async () => (s.types.includes("dev.knative.sources.ping") ? true : undefined),
      15_000,
    );
    expect(records.filter((r) => r.level === 30).map((r) => r.msg)).toContain(
      `the API server at http://127.0.0.1:${port} answers again: resyncing`,
    );
    expect(records.filter((r) => r.level >= 40)).toHaveLength(1);
  });
});
