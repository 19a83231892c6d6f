import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { startEventBridge } from "../../shared/dev/event-bridge.js";
import { KubeApiEmulator } from "../../shared/dev/kube-api-emulator.js";
import { freePort, waitFor } from "../support/net.js";

/** A reconcile function stand-in that counts the CloudEvents it is sent, by type, and keeps their headers. */
async function sink(): Promise<{ url: string; types: string[]; headers: IncomingHttpHeaders[]; server: Server }> {
  const types: string[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    types.push(String(req.headers["ce-type"]));
    headers.push(req.headers);
    req.resume();
    req.on("end", () => res.writeHead(204).end());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, types, headers, server };
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

describe("the local event bridge with a hand-made object", () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  it("delivers an object whose name no header can carry as is, percent-encoded as CloudEvents' HTTP binding says", async () => {
    const api = await new KubeApiEmulator().start();
    cleanup.push(() => api.stop());
    const s = await sink();
    cleanup.push(() => new Promise((r) => s.server.close(r)));
    const { records, log } = recorder();
    const stop = startEventBridge({
      kc: kubeconfig(Number(new URL(api.url).port), api.token),
      sink: s.url,
      resyncMs: 60_000,
      log,
    });
    cleanup.push(stop);
    await waitFor("the first resync", async () => (s.types.includes("dev.knative.sources.ping") ? true : undefined));

    api.upsert("Service", {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: 'web\nx "50%" é', namespace: "default" },
      spec: { ports: [{ port: 80 }] },
    });
    const delivered = await waitFor("the Service's event", async () =>
      s.headers.find((h) => h["ce-type"] === "dev.knative.apiserver.resource.add"),
    );
    expect(delivered["ce-name"]).toBe("web%0Ax%20%2250%25%22%20%C3%A9");
    expect(delivered["ce-subject"]).toBe("/apis/v1/namespaces/default/services/web%0Ax%20%2250%25%22%20%C3%A9");
    expect(records.filter((r) => r.level >= 40)).toEqual([]);
  });
});
