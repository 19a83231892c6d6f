/*
 * bench/gateway-consistency: the Gateway API's consistency budget on the local stack (Kubernetes
 * API emulator → event bridge → reconcile function → s3rver → agent → HAProxy): from an HTTPRoute
 * written to the Kubernetes API, as `kubectl apply` / `delete` send it, until three requests in a
 * row through HAProxy answer as the route now says, polled as the conformance suite polls
 * (conformance/utils/http AwaitConvergence: 100 ms after a failed try, successes back to back,
 * MaxTimeToConsistency 30 s). Three kinds of change, in turns: a route added, its backend
 * changed, the route deleted (then 404).
 *   node dist/dev/bench/gateway-consistency.js [--services 100] [--changes 10] [--json]
 */

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../shared/dev/ports.js";
import { httpRequest } from "../test/support/net.js";
import { startStack } from "./local-stack.js";
import { arg, machine, percentile, table } from "./machine.js";

const services = arg("--services", 100);
const changes = arg("--changes", 10);
const json = process.argv.includes("--json");
const BUDGET_MS = 30_000;
const POLL_MS = 100;
const ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

/** Each Service's one endpoint has an address of its own, so an answer says which Service gave it. */
const addressOf = (i: number) => `127.0.${1 + Math.floor(i / 250)}.${(i % 250) + 1}`;

const route = (name: string, backend: number) => ({
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "HTTPRoute",
  metadata: { name, namespace: "default" },
  spec: {
    parentRefs: [{ name: "public" }],
    hostnames: [`${name}.example`],
    rules: [{ backendRefs: [{ name: `svc-${backend}`, port: 80 }] }],
  },
});

function clusterFile(gatewayPort: number, podPort: number): unknown {
  const items: unknown[] = [
    {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "GatewayClass",
      metadata: { name: "servicelb" },
      spec: { controllerName: "servicelb.io/gateway-controller" },
    },
    {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "Gateway",
      metadata: { name: "public", namespace: "default", generation: 1 },
      spec: { gatewayClassName: "servicelb", listeners: [{ name: "http", port: gatewayPort, protocol: "HTTP" }] },
    },
  ];
  // A route from the start: a listener's frontend is rendered once a route attaches to it.
  items.push(route("ready", 0));
  for (let i = 0; i < services; i++)
    items.push(
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: `svc-${i}`, namespace: "default" },
        spec: { clusterIP: "10.96.0.1", ports: [{ name: "http", port: 80 }] },
      },
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: `svc-${i}-0`, namespace: "default", labels: { "kubernetes.io/service-name": `svc-${i}` } },
        addressType: "IPv4",
        ports: [{ name: "http", port: podPort, protocol: "TCP" }],
        endpoints: [{ addresses: [addressOf(i)], conditions: { ready: true } }],
      },
    );
  return { apiVersion: "v1", kind: "List", items };
}

interface Sample {
  kind: string;
  firstMs: number;
  consistentMs: number;
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "bench-gateway-"));
  const [httpPort, statsPort, gatewayPort, podPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const file = join(root, "cluster.json");
  writeFileSync(file, JSON.stringify(clusterFile(gatewayPort, podPort)));
  mkdirSync(join(root, "data"));
  const answer = async (host: string) => {
    const r = await httpRequest(gatewayPort, "GET", "/", { host }).catch(() => null);
    return r === null ? "no answer" : r.status === 200 ? r.body : String(r.status);
  };
  const stack = await startStack({
    policy: "servicelb",
    clusterFile: file,
    dataDir: join(root, "data"),
    httpPort,
    statsPort,
    flags: ["--resync", "60000"],
    ready: async () => (await answer("ready.example")).startsWith(`demo backend ${addressOf(0)}:`),
  });
  const samples: Sample[] = [];
  const loads: number[] = [];
  /** AwaitConvergence: from `sent`, the first good answer and the third of three in a row. */
  const converge = async (kind: string, host: string, good: (body: string) => boolean, sent: number) => {
    let first = Number.NaN;
    let inRow = 0;
    while (now() - sent < BUDGET_MS) {
      if (good(await answer(host))) {
        if (Number.isNaN(first)) first = now() - sent;
        if (++inRow === 3) {
          samples.push({ kind, firstMs: first, consistentMs: now() - sent });
          return;
        }
        continue;
      }
      inRow = 0;
      await sleep(POLL_MS);
    }
    samples.push({ kind, firstMs: first, consistentMs: Number.POSITIVE_INFINITY });
  };
  const from = (i: number) => (body: string) => body.startsWith(`demo backend ${addressOf(i)}:${podPort} `);
  try {
    for (let c = 0; c < changes; c++) {
      const name = `route-${c}`;
      const [a, b] = [c % services, (c + 1) % services];
      let sent = now();
      await stack.apiWrite("POST", ROUTES, route(name, a));
      await converge("route added", `${name}.example`, from(a), sent);
      sent = now();
      await stack.apiWrite("PUT", `${ROUTES}/${name}`, route(name, b));
      await converge("backend changed", `${name}.example`, from(b), sent);
      sent = now();
      await stack.apiWrite("DELETE", `${ROUTES}/${name}`);
      await converge("route deleted", `${name}.example`, (body) => body === "404", sent);
      loads.push(loadavg()[0]!);
    }
  } finally {
    await stack.stop();
    rmSync(root, { recursive: true, force: true });
  }
  const kinds = [...new Set(samples.map((s) => s.kind))];
  const rows = kinds.map((kind) => {
    const of = samples.filter((s) => s.kind === kind);
    const first = of.map((s) => s.firstMs);
    const consistent = of.map((s) => s.consistentMs);
    const ms = (v: number) => (Number.isFinite(v) ? Math.round(v) : "over 30 s");
    return {
      kind,
      n: of.length,
      first: { p50: ms(percentile(first, 50)), p99: ms(percentile(first, 99)), max: ms(Math.max(...first)) },
      consistent: {
        p50: ms(percentile(consistent, 50)),
        p99: ms(percentile(consistent, 99)),
        max: ms(Math.max(...consistent)),
      },
      overBudget: consistent.filter((v) => v > BUDGET_MS).length,
    };
  });
  const load = `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}`;
  if (json) {
    console.log(JSON.stringify({ machine: machine(), services, changes, load, rows }, null, 2));
    return;
  }
  console.log(
    `bench/gateway-consistency: ${machine()}; ${services} Services, ${changes} changes of each kind, load ${load}`,
  );
  console.log(
    table(
      ["change", "n", "first good p50 / p99 / max ms", "3 in a row p50 / p99 / max ms", "over 30 s"],
      rows.map((r) => [
        r.kind,
        r.n,
        `${r.first.p50} / ${r.first.p99} / ${r.first.max}`,
        `${r.consistent.p50} / ${r.consistent.p99} / ${r.consistent.max}`,
        r.overBudget,
      ]),
    ),
  );
}

await main();
