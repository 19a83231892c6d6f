import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createObjectStore } from "../shared/adapters/object-store.js";
import { packageRoot } from "../shared/adapters/templates.js";
import { freePort } from "../shared/local/ports.js";
import { httpGet } from "../test/support/net.js";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";
import { machine, table, percentile } from "./machine.js";

/**
 * bench/e2e: the whole pipeline as `npm start` runs it (Kubernetes API emulator → event bridge →
 * reconcile function → s3rver → agent → HAProxy), N Services with real demo backends on
 * loopback. A change is made in the demo cluster file; a client polls through HAProxy until the
 * change is served.
 *   node dist/bench/e2e.js [--services 1000] [--changes 30] [--json]
 */
const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const services = arg("--services", 1000);
const changes = arg("--changes", 30);
const ENDPOINTS_PER_SERVICE = 10;
const STORM_EVENTS = 1000;
const STORM_SECONDS = 10;

interface Item {
  kind: string;
  [k: string]: unknown;
}

function svc(name: string): Item {
  return { apiVersion: "v1", kind: "Service", metadata: { name, namespace: "default" }, spec: { clusterIP: "10.96.0.1", ports: [{ name: "http", port: 80 }] } };
}

/** Ten endpoints, all 127.0.0.1 on demo ports: the demo starts one backend per port. */
function endpoints(name: string, ports: number[]): Item[] {
  return ports.map((port, i) => ({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: `${name}-${i}`, namespace: "default", labels: { "kubernetes.io/service-name": name } },
    addressType: "IPv4",
    ports: [{ name: "http", port, protocol: "TCP" }],
    endpoints: [{ addresses: ["127.0.0.1"], conditions: { ready: true } }],
  }));
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-e2e-"));
  const file = join(dir, "cluster.json");
  const [httpPort, statsPort] = [await freePort(), await freePort()];
  const basePorts = await Promise.all(Array.from({ length: ENDPOINTS_PER_SERVICE }, () => freePort()));
  const spare = await Promise.all(Array.from({ length: 2 }, () => freePort()));
  const portsOf = new Map<string, number[]>();
  const names: string[] = [];
  for (let i = 0; i < services; i++) {
    names.push(`svc-${i}`);
    portsOf.set(`svc-${i}`, basePorts);
  }
  // The spare ports are in the file from the start, so their demo backends already run.
  portsOf.set("spare", spare);
  names.push("spare");
  const write = () => writeFileSync(file, JSON.stringify({ apiVersion: "v1", kind: "List", items: names.flatMap((n) => [svc(n), ...endpoints(n, portsOf.get(n)!)]) }));
  write();

  const stack = spawn(process.execPath, [join(packageRoot(), "bin", "servicelb.js"), "local", "--demo", "--cluster-file", file, "--data-dir", join(dir, "data"), "--http-port", String(httpPort), "--stats-port", String(statsPort), "--resync", "60000"], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  stack.stdout.on("data", (c: Buffer) => (out += c.toString()));
  const waitUntil = async (what: string, probe: () => Promise<boolean>, timeoutMs = 120_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await probe().catch(() => false))) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const servedBy = async (path: string, port: number) => (await httpGet(httpPort, path)).body.includes(`127.0.0.1:${port} `);
  try {
    await waitUntil("the stack", async () => out.includes("Ctrl-C stops everything."));
    const agentUrl = /agent (http:\/\/127\.0\.0\.1:\d+)\/status/.exec(out)?.[1];
    await waitUntil("the first config served", async () => (await httpGet(httpPort, `/svc-${services - 1}/`)).status === 200);
    const reloads = async () => Number(/^servicelb_agent_reloads_total (\S+)$/m.exec(await (await fetch(`${agentUrl}/metrics`)).text())?.[1] ?? NaN);

    const endpointChange: number[] = [];
    const reloadsBefore = await reloads();
    for (let i = 0; i < changes; i++) {
      const name = `svc-${(i * 37) % services}`;
      const target = spare[i % 2]!;
      portsOf.set(name, [target, ...basePorts.slice(1)]);
      const t0 = performance.now();
      write();
      // Any of its 10 endpoints may answer; wait until the moved one does.
      await waitUntil(`${name} on :${target}`, async () => {
        for (let k = 0; k < ENDPOINTS_PER_SERVICE; k++) if (await servedBy(`/${name}/`, target)) return true;
        return false;
      });
      endpointChange.push(performance.now() - t0);
      portsOf.set(name, basePorts);
      write();
      await waitUntil(`${name} back`, async () => {
        for (let k = 0; k < ENDPOINTS_PER_SERVICE; k++) if (await servedBy(`/${name}/`, target)) return false;
        return true;
      });
    }
    const endpointReloads = (await reloads()) - reloadsBefore;

    const added: number[] = [];
    for (let i = 0; i < changes; i++) {
      const name = `new-${i}`;
      names.push(name);
      portsOf.set(name, basePorts);
      const t0 = performance.now();
      write();
      await waitUntil(`${name} routed`, async () => (await httpGet(httpPort, `/${name}/`)).status === 200);
      added.push(performance.now() - t0);
    }
    // Event storm: 1,000 ApiServerSource update events in 10 s for an object that did not change.
    const reconcileUrl = /reconcile\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1];
    const s3Endpoint = /s3rver at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
    const store = createObjectStore({ url: "s3://servicelb/local", endpoint: s3Endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS });
    const configsBefore = (await store.history()).length;
    const stormReloadsBefore = await reloads();
    const runtimeBefore = Number(/^servicelb_agent_runtime_updates_total (\S+)$/m.exec(await (await fetch(`${agentUrl}/metrics`)).text())?.[1] ?? NaN);
    const object = endpoints("svc-1", basePorts)[0]!;
    const stormStart = performance.now();
    const answers: Array<Promise<number>> = [];
    for (let i = 0; i < STORM_EVENTS; i++) {
      const due = stormStart + (i * STORM_SECONDS * 1000) / STORM_EVENTS;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      answers.push(
        fetch(reconcileUrl!, {
          method: "POST",
          headers: { "content-type": "application/json", "ce-specversion": "1.0", "ce-id": `storm-${i}`, "ce-type": "dev.knative.apiserver.resource.update", "ce-source": "bench" },
          body: JSON.stringify(object),
        }).then((r) => r.status, () => 0),
      );
    }
    const statuses = await Promise.all(answers);
    const stormSeconds = (performance.now() - stormStart) / 1000;
    await new Promise((r) => setTimeout(r, 2000));
    const storm = {
      events: STORM_EVENTS,
      seconds: Math.round(stormSeconds * 10) / 10,
      failedDeliveries: statuses.filter((st) => st < 200 || st >= 300).length,
      configsWritten: (await store.history()).length - configsBefore,
      reloads: (await reloads()) - stormReloadsBefore,
      runtimeUpdates: Number(/^servicelb_agent_runtime_updates_total (\S+)$/m.exec(await (await fetch(`${agentUrl}/metrics`)).text())?.[1] ?? NaN) - runtimeBefore,
    };
    store.close();

    const result = {
      storm,
      machine: machine(),
      services,
      endpointsPerService: ENDPOINTS_PER_SERVICE,
      changes,
      endpointChange: { p50: percentile(endpointChange, 50), p90: percentile(endpointChange, 90), p99: percentile(endpointChange, 99), reloads: endpointReloads },
      serviceAdded: { p50: percentile(added, 50), p90: percentile(added, 90), p99: percentile(added, 99) },
    };
    if (process.argv.includes("--json")) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      return;
    }
    const ms = (x: number) => `${Math.round(x)} ms`;
    console.log(`bench/e2e — ${result.machine}`);
    console.log(`${services} Services × ${ENDPOINTS_PER_SERVICE} endpoints through npm start's pipeline; ${changes} changes of each kind, each made by editing the demo cluster file\n`);
    console.log(
      table(
        ["change → served through HAProxy", "p50", "p90", "p99", "notes"],
        [
          ["endpoint moved (EndpointSlice edited)", ms(result.endpointChange.p50), ms(result.endpointChange.p90), ms(result.endpointChange.p99), `${endpointReloads} HAProxy reloads`],
          ["Service added", ms(result.serviceAdded.p50), ms(result.serviceAdded.p90), ms(result.serviceAdded.p99), "one reload each"],
        ],
      ),
    );
    console.log("\nEach figure includes the file watcher's 50 ms debounce and the client's polling (5 ms).\n");
    console.log(
      table(
        [`event storm: ${storm.events} update events for an unchanged object in ${storm.seconds} s`, "value"],
        [
          ["deliveries refused (non-2xx)", storm.failedDeliveries],
          ["configs written", storm.configsWritten],
          ["HAProxy reloads", storm.reloads],
          ["runtime API updates", storm.runtimeUpdates],
        ],
      ),
    );
  } finally {
    stack.kill("SIGINT");
    await new Promise((r) => stack.once("exit", r));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
