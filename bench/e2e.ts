import { type DigestKind, digestKind } from "../shared/core/publish/config-digest.js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createObjectStore } from "../shared/adapters/store.js";
import { freePort } from "../shared/dev/ports.js";
import { httpGet } from "../test/support/net.js";
import { S3RVER_CREDENTIALS } from "../test/support/s3.js";
import { busyCoreFromArgs, describeBusyCore } from "./busy-core.js";
import { cpuBetween, processCpu } from "./process-cpu.js";
import { startStack as launchStack, type Stack, waitUntil } from "./local-stack.js";
import { arg, machine, percentile, seeded, table } from "./machine.js";
import { readTrace, type TraceRecord } from "./trace-file.js";

/**
 * bench/e2e: the whole pipeline as `npm start` runs it (Kubernetes API emulator → event bridge →
 * reconcile function → s3rver → agent → HAProxy), N Services with real demo backends on
 * loopback. A change is written to the Kubernetes API (or, for one row, made in the demo cluster
 * file); a client polls through HAProxy until the change is served. Then the same changes
 * through the same pipeline with each peer's published update policy in front of reconcile.
 * With --busy-core (or --busy-core-pin CPU) a spinning process keeps one core busy meanwhile.
 *   node dist/dev/bench/e2e.js [--services 1000] [--changes 30] [--endpoint-changes N] [--peer-changes 20]
 *     [--burst 10] [--busy-core | --busy-core-pin CPU] [--json]
 */
const services = arg("--services", 1000);
const changes = arg("--changes", 30);
/** Endpoint moves through the API (the row of issue 14 §4); as many as --changes unless given. */
const endpointChanges = arg("--endpoint-changes", changes);
/** Services added and endpoints moved back to back per policy, to count the reloads each policy makes. */
const burstSize = arg("--burst", 10);
/** Changes of each kind per policy in the side by side (the peers' periods make these slow). */
const peerChanges = arg("--peer-changes", 20);
/**
 * Spares for every Service the run adds (the Service-added row, the side by side and the burst):
 * the rows of servicelb's own stack measure the path without a reload.
 */
const SPARE_BACKENDS = changes + peerChanges + burstSize + 16;
const GAP_MS = 5000;
const PEERS = ["haproxy-ingress", "haproxytech"] as const;
const ENDPOINTS_PER_SERVICE = 10;
const STORM_EVENTS = 1000;
const STORM_SECONDS = 10;

interface Burst {
  changes: number;
  /** From the first write sent to the last stored. */
  writtenMs: number;
  /** From the first write sent until every change is served. */
  servedMs: number;
  configs: number;
  reloads: number;
}

interface Item {
  kind: string;
  [k: string]: unknown;
}

function svc(name: string, annotations?: Record<string, string>): Item {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default", annotations },
    spec: { clusterIP: "10.96.0.1", ports: [{ name: "http", port: 80 }] },
  };
}

/**
 * A Service's one EndpointSlice, as a cluster of this size has: its endpoints on loopback
 * addresses (127.0.0.1…) and one demo port; the demo starts a backend per address and port.
 */
function endpoints(name: string, hosts: string[], port: number): Item[] {
  return [
    {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: `${name}-0`, namespace: "default", labels: { "kubernetes.io/service-name": name } },
      addressType: "IPv4",
      ports: [{ name: "http", port, protocol: "TCP" }],
      endpoints: hosts.map((host) => ({ addresses: [host], conditions: { ready: true } })),
    },
  ];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();

async function main(): Promise<void> {
  const busy = busyCoreFromArgs(process.argv);
  try {
    await measure(busy);
  } finally {
    await busy?.stop();
  }
}

async function measure(busy: ReturnType<typeof busyCoreFromArgs>): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "bench-e2e-"));
  const traceFile = join(root, "trace.ndjson");
  const [httpPort, statsPort] = [await freePort(), await freePort()];
  const port = await freePort();
  const baseHosts = Array.from({ length: ENDPOINTS_PER_SERVICE }, (_, k) => `127.0.0.${k + 1}`);
  const spare = [`127.0.0.${ENDPOINTS_PER_SERVICE + 1}`, `127.0.0.${ENDPOINTS_PER_SERVICE + 2}`];
  const hostsOf = new Map<string, string[]>();
  const names: string[] = [];
  for (let i = 0; i < services; i++) {
    names.push(`svc-${i}`);
    hostsOf.set(`svc-${i}`, baseHosts);
  }
  // The spare addresses are in the file from the start, so their demo backends already run.
  hostsOf.set("spare", spare);
  names.push("spare");
  const baseNames = [...names];
  let file = "";
  const write = () =>
    writeFileSync(
      file,
      JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: names.flatMap((n) => [svc(n), ...endpoints(n, hostsOf.get(n)!, port)]),
      }),
    );

  let stackCount = 0;
  async function startStack(policy: string): Promise<Stack> {
    const dir = join(root, `stack-${stackCount++}`);
    mkdirSync(dir);
    file = join(dir, "cluster.json");
    names.splice(0, names.length, ...baseNames);
    for (const n of baseNames) hostsOf.set(n, n === "spare" ? spare : baseHosts);
    write();
    return launchStack({
      policy,
      clusterFile: file,
      dataDir: join(dir, "data"),
      httpPort,
      statsPort,
      flags: ["--resync", "60000"],
      env: {
        SERVICELB_TRACE_FILE: policy === "servicelb" ? traceFile : "",
        // The peers have no spare backends: a Service added is a reload for them.
        SERVICELB_SPARE_BACKENDS: String(policy === "servicelb" ? SPARE_BACKENDS : 0),
      },
      ready: async () => (await httpGet(httpPort, `/svc-${services - 1}/`)).status === 200,
    });
  }

  const servedBy = async (path: string, host: string) =>
    (await httpGet(httpPort, path)).body.includes(`${host}:${port} `);
  /**
   * Any of its endpoints may answer: true once the one on `host` does (or, `gone`, once none of
   * them does). Round robin: as many requests at once as the Service has slots in use (its 10
   * endpoints and, during a move, a spare slot) reach every one of them; one request after the
   * other, the probe itself took up to 11 request times to notice a change.
   */
  const endpointSeen =
    (name: string, host: string, gone = false) =>
    async () => {
      const seen = await Promise.all(
        Array.from({ length: ENDPOINTS_PER_SERVICE + 1 }, () => servedBy(`/${name}/`, host)),
      );
      return seen.some(Boolean) !== gone;
    };
  /** The Service's slice with its first endpoint moved to `host`. */
  const sliceOf = (name: string, host: string) => endpoints(name, [host, ...baseHosts.slice(1)], port)[0]!;
  const slicePath = (name: string) => `/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/${name}-0`;
  /**
   * `kubectl apply` of a new Service and its slice: one request per object, in order. Returns
   * when its last EndpointSlice was sent: the write whose event publishes the Service.
   */
  const addThroughApi = async (stack: Stack, name: string) => {
    await stack.apiWrite("POST", "/api/v1/namespaces/default/services", svc(name));
    let sent = now();
    for (const slice of endpoints(name, baseHosts, port)) {
      sent = now();
      await stack.apiWrite("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", slice);
    }
    return sent;
  };
  const stats = (v: number[]) => ({
    p50: percentile(v, 50),
    p90: percentile(v, 90),
    p99: percentile(v, 99),
    n: v.length,
  });

  // --- servicelb's own pipeline ---
  const own = await startStack("servicelb");
  let storm: Record<string, number>;
  const byFile: number[] = [];
  const endpointChange: number[] = [];
  const marks: Array<{ edit: number; served: number }> = [];
  /** A Service added, from its EndpointSlice's POST (the Service's own event publishes nothing yet). */
  const addMarks: Array<{ edit: number; served: number }> = [];
  const added: number[] = [];
  const allowChange: number[] = [];
  let endpointReloads: number;
  let endpointCpu: { wallMs: number; byRole: ReturnType<typeof cpuBetween> };
  let allowReloads: number;
  let addReloads: number;
  let digest: DigestKind = "sha256";
  const reloads = async (agentUrl: string) =>
    Number(
      /^servicelb_agent_reloads_total (\S+)$/m.exec(await (await fetch(`${agentUrl}/metrics`)).text())?.[1] ?? NaN,
    );
  const sideBySide: Record<
    string,
    { endpoint: ReturnType<typeof stats>; added: ReturnType<typeof stats>; reloads: number; burst: Burst }
  > = {};
  const schedule = async (stack: Stack, tag: string) => {
    const reloadsBefore = await reloads(stack.agentUrl);
    const spaced = await runSchedule(stack, tag);
    const spacedReloads = (await reloads(stack.agentUrl)) - reloadsBefore;
    return { ...spaced, reloads: spacedReloads, burst: await runBurst(stack, tag) };
  };
  /** The newest config's seq: each publish is the newest's seq + 1, so a difference counts publishes (pruning aside). */
  const newestSeq = async (stack: Stack) => {
    const store = createObjectStore({
      url: "s3://servicelb/local",
      endpoint: stack.s3Endpoint,
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
    });
    try {
      return (await store.history({ limit: 1 }))[0]?.seq ?? 0;
    } finally {
      store.close();
    }
  };
  /**
   * A burst: --burst endpoints moved and as many Services added, each write sent as soon as the
   * API server stored the one before, then the time until all of them are served, and what the
   * burst cost: configs published and HAProxy reloads (counted after a settle longer than the
   * longest policy period, so a policy's last update is in). This is what a peer's batching buys.
   */
  async function runBurst(stack: Stack, tag: string): Promise<Burst> {
    await sleep(GAP_MS + 1000);
    const seqBefore = await newestSeq(stack);
    const reloadsBefore = await reloads(stack.agentUrl);
    const moved = Array.from({ length: burstSize }, (_, i) => `svc-${(i * 71 + 23) % services}`);
    const add = Array.from({ length: burstSize }, (_, i) => `${tag}-burst-${i}`);
    const t0 = performance.now();
    for (let i = 0; i < burstSize; i++) {
      await stack.apiWrite("PUT", slicePath(moved[i]!), sliceOf(moved[i]!, spare[1]!));
      await addThroughApi(stack, add[i]!);
    }
    const writtenMs = performance.now() - t0;
    for (const name of moved) await waitUntil(`${name} on ${spare[1]}`, endpointSeen(name, spare[1]!), 60_000);
    for (const name of add)
      await waitUntil(`${name} routed`, async () => (await httpGet(httpPort, `/${name}/`)).status === 200, 60_000);
    const servedMs = performance.now() - t0;
    await sleep(GAP_MS + 1000);
    return {
      changes: 2 * burstSize,
      writtenMs,
      servedMs,
      configs: (await newestSeq(stack)) - seqBefore,
      reloads: (await reloads(stack.agentUrl)) - reloadsBefore,
    };
  }
  async function runSchedule(stack: Stack, tag: string) {
    // Changes arrive at random moments (uniform gaps up to the longest peer period), the same for every policy.
    const random = seeded(6);
    const endpoint: number[] = [];
    const add: number[] = [];
    for (let i = 0; i < peerChanges; i++) {
      await sleep(random() * GAP_MS);
      const name = `svc-${(i * 53 + 11) % services}`;
      const t0 = performance.now();
      await stack.apiWrite("PUT", slicePath(name), sliceOf(name, spare[0]!));
      await waitUntil(`${name} on ${spare[0]}`, endpointSeen(name, spare[0]!), 60_000);
      endpoint.push(performance.now() - t0);
      await sleep(random() * GAP_MS);
      const added = `${tag}-${i}`;
      const t1 = performance.now();
      await addThroughApi(stack, added);
      await waitUntil(`${added} routed`, async () => (await httpGet(httpPort, `/${added}/`)).status === 200, 60_000);
      add.push(performance.now() - t1);
    }
    return { endpoint: stats(endpoint), added: stats(add) };
  }
  try {
    // The file path of npm start: an edit of the demo cluster file, its watcher and re-read first.
    for (let i = 0; i < changes; i++) {
      const name = `svc-${(i * 37) % services}`;
      const target = spare[i % 2]!;
      hostsOf.set(name, [target, ...baseHosts.slice(1)]);
      const t0 = performance.now();
      write();
      await waitUntil(`${name} on ${target}`, endpointSeen(name, target));
      byFile.push(performance.now() - t0);
      hostsOf.set(name, baseHosts);
      write();
      await waitUntil(`${name} back`, endpointSeen(name, target, true));
    }

    // The API path, as a cluster receives a change: one write to the API server.
    const reloadsBefore = await reloads(own.agentUrl);
    const cpuBefore = processCpu();
    const wallBefore = performance.now();
    for (let i = 0; i < endpointChanges; i++) {
      const name = `svc-${(i * 37 + 5) % services}`;
      const target = spare[i % 2]!;
      const t0 = performance.now();
      const edit = now();
      await own.apiWrite("PUT", slicePath(name), sliceOf(name, target));
      await waitUntil(`${name} on ${target}`, endpointSeen(name, target));
      endpointChange.push(performance.now() - t0);
      marks.push({ edit, served: now() });
      await own.apiWrite("PUT", slicePath(name), sliceOf(name, baseHosts[0]!));
      await waitUntil(`${name} back`, endpointSeen(name, target, true));
    }
    endpointReloads = (await reloads(own.agentUrl)) - reloadsBefore;
    endpointCpu = { wallMs: performance.now() - wallBefore, byRole: cpuBetween(cpuBefore, processCpu()) };

    // Each Service goes into a spare backend (enough of them: SPARE_BACKENDS), routed by map lines.
    const addReloadsBefore = await reloads(own.agentUrl);
    for (let i = 0; i < changes; i++) {
      const name = `new-${i}`;
      const t0 = performance.now();
      const sliceSent = await addThroughApi(own, name);
      await waitUntil(`${name} routed`, async () => (await httpGet(httpPort, `/${name}/`)).status === 200);
      added.push(performance.now() - t0);
      addMarks.push({ edit: sliceSent, served: now() });
    }
    addReloads = (await reloads(own.agentUrl)) - addReloadsBefore;
    // An allow list changed (a Service PUT with another lb.allow-source-range): the Service
    // "spare" first gets a list without the client (a new pattern file: one reload), then lists
    // that let the client (127.0.0.1) in and out in turn, each applied through the runtime API.
    const allowPath = "/api/v1/namespaces/default/services/spare";
    const withList = (list: string) => svc("spare", { "serviceloadbalancer/lb.allow-source-range": list });
    const statusIs = (code: number) => async () => (await httpGet(httpPort, "/spare/")).status === code;
    await own.apiWrite("PUT", allowPath, withList("10.0.0.0/8"));
    await waitUntil("spare refused", statusIs(403));
    const allowReloadsBefore = await reloads(own.agentUrl);
    for (let i = 0; i < changes; i++) {
      const letIn = i % 2 === 0;
      const t0 = performance.now();
      await own.apiWrite("PUT", allowPath, withList(letIn ? "10.0.0.0/8, 127.0.0.1" : "10.0.0.0/8"));
      await waitUntil(`spare ${letIn ? "served" : "refused"}`, statusIs(letIn ? 200 : 403));
      allowChange.push(performance.now() - t0);
    }
    allowReloads = (await reloads(own.agentUrl)) - allowReloadsBefore;
    sideBySide.servicelb = await schedule(own, "own");

    // Event storm: 1,000 ApiServerSource update events in 10 s for an object that did not change.
    // First let the last passes settle.
    await sleep(3000);
    const store = createObjectStore({
      url: "s3://servicelb/local",
      endpoint: own.s3Endpoint,
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
    });
    const seqBefore = await newestSeq(own);
    const stormReloadsBefore = await reloads(own.agentUrl);
    const runtimeUpdates = async () =>
      Number(
        /^servicelb_agent_runtime_updates_total (\S+)$/m.exec(
          await (await fetch(`${own.agentUrl}/metrics`)).text(),
        )?.[1] ?? NaN,
      );
    const runtimeBefore = await runtimeUpdates();
    const object = endpoints("svc-1", baseHosts, port)[0]!;
    const stormStart = performance.now();
    const answers: Array<Promise<number>> = [];
    for (let i = 0; i < STORM_EVENTS; i++) {
      const due = stormStart + (i * STORM_SECONDS * 1000) / STORM_EVENTS;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      answers.push(
        fetch(own.reconcileUrl, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "ce-specversion": "1.0",
            "ce-id": `storm-${i}`,
            "ce-type": "dev.knative.apiserver.resource.update",
            "ce-source": "bench",
          },
          body: JSON.stringify(object),
        }).then(
          (r) => r.status,
          () => 0,
        ),
      );
    }
    const statuses = await Promise.all(answers);
    const stormSeconds = (performance.now() - stormStart) / 1000;
    await sleep(2000);
    storm = {
      events: STORM_EVENTS,
      seconds: Math.round(stormSeconds * 10) / 10,
      failedDeliveries: statuses.filter((st) => st < 200 || st >= 300).length,
      configsWritten: (await newestSeq(own)) - seqBefore,
      reloads: (await reloads(own.agentUrl)) - stormReloadsBefore,
      runtimeUpdates: (await runtimeUpdates()) - runtimeBefore,
    };
    // The kind the function chose from the agent's report (app/agent-reports.ts).
    const status = (await (await fetch(`${own.agentUrl}/status`)).json()) as { applied?: { sha256?: string } };
    digest = digestKind(status.applied?.sha256 ?? "");
    store.close();
  } finally {
    await own.stop();
  }

  // --- the same pipeline and changes, each peer's published update policy in front of reconcile ---
  for (const peer of PEERS) {
    const stack = await startStack(peer);
    try {
      sideBySide[peer] = await schedule(stack, "peer");
    } finally {
      await stack.stop();
    }
  }
  const trace = readTrace(traceFile);
  const traced = stages(trace, marks);
  const tracedAdds = stages(trace, addMarks);
  rmSync(root, { recursive: true, force: true });

  const result = {
    machine: machine(),
    busyCore: busy ? { cpu: busy.cpu, share: Math.round(busy.share() * 100) / 100 } : null,
    load: loadavg().map((l) => Math.round(l * 100) / 100),
    services,
    endpointsPerService: ENDPOINTS_PER_SERVICE,
    changes,
    digest,
    endpointChange: { ...stats(endpointChange), reloads: endpointReloads },
    endpointChangeByFileEdit: stats(byFile),
    serviceAdded: { ...stats(added), reloads: addReloads, spareBackends: SPARE_BACKENDS },
    allowListChanged: { ...stats(allowChange), reloads: allowReloads },
    endpointCpu: endpointCpu!,
    stages: traced,
    addStages: tracedAdds,
    sideBySide: { changes: peerChanges, maxGapMs: GAP_MS, burst: burstSize, policies: sideBySide },
    storm,
  };
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const ms = (x: number) => `${Math.round(x)} ms`;
  const row = (label: string, v: { p50: number; p90: number; p99: number }, note: string) => [
    label,
    ms(v.p50),
    ms(v.p90),
    ms(v.p99),
    note,
  ];
  console.log(`bench/e2e — ${result.machine}`);
  console.log(`${describeBusyCore(busy)}; load average at the end ${result.load.join(", ")} (1, 5, 15 min)`);
  console.log(
    `${services} Services × ${ENDPOINTS_PER_SERVICE} endpoints through npm start's pipeline; ${changes} changes of each kind (${endpointChanges} endpoint moves through the API); configs published by ${digest} digests\n`,
  );
  console.log(
    table(
      ["change → served through HAProxy", "p50", "p90", "p99", "notes"],
      [
        row(
          "endpoint moved (EndpointSlice PUT to the API)",
          result.endpointChange,
          `${endpointReloads} HAProxy reloads`,
        ),
        row(
          "Service added (Service and its slice POSTed)",
          result.serviceAdded,
          `${addReloads} HAProxy reloads (--spare-backends ${SPARE_BACKENDS})`,
        ),
        row(
          "allow list changed (Service PUT, client let in or out)",
          result.allowListChanged,
          `${allowReloads} HAProxy reloads`,
        ),
        row(
          "endpoint moved by editing the demo cluster file",
          result.endpointChangeByFileEdit,
          "file watcher, 50 ms debounce, re-read of the file",
        ),
      ],
    ),
  );
  const stageTable = (title: string, rows: typeof traced) => {
    console.log(
      `\n${title} (each stage from the end of the one before; the ${SLOWEST_SHOWN} slowest traced changes one by one):\n`,
    );
    const shown = rows[0]?.slowest.length ?? 0;
    console.log(
      table(
        ["stage", "p50", "p99", ...Array.from({ length: shown }, (_, i) => `slowest ${i + 1}`), "notes"],
        rows.map((st) => [st.stage, ms(st.p50), ms(st.p99), ...st.slowest.map(ms), st.note]),
      ),
    );
  };
  stageTable("Where an endpoint change's time goes (its EndpointSlice PUT to the API)", result.stages);
  // Each move is followed by its revert, which goes through the whole pipeline too.
  const applied = 2 * endpointChanges;
  console.log(
    `\nCPU per endpoint change, by process: ${applied} changes (each move and its revert) in ${(result.endpointCpu.wallMs / 1000).toFixed(1)} s; processes that exited meanwhile are not counted:\n`,
  );
  console.log(
    table(
      ["process", "CPU per change", "share of one core over the stretch"],
      result.endpointCpu.byRole.map(({ role, ms: spent }) => [
        role,
        `${(spent / applied).toFixed(1)} ms`,
        `${Math.round((spent / result.endpointCpu.wallMs) * 100)} %`,
      ]),
    ),
  );
  stageTable(
    "Where a Service added spends it (from its EndpointSlice's POST; its Service was POSTed just before)",
    result.addStages,
  );
  console.log(
    `\nSide by side: ${peerChanges} changes of each kind through the same pipeline, each after a random pause of 0–${GAP_MS / 1000} s (same pauses for every row):\n`,
  );
  const label: Record<string, string> = {
    servicelb: "servicelb pipeline, servicelb's own policy (deliver at once)",
    "haproxy-ingress": "servicelb pipeline with haproxy-ingress's update policy (wait 200 ms, ≤ 1 update / 2 s)",
    haproxytech: "servicelb pipeline with haproxytech/kubernetes-ingress's update policy (every 5 s)",
  };
  console.log(
    table(
      ["policy", "change", "p50", "p90", "p99", "HAProxy reloads over both kinds"],
      Object.entries(sideBySide).flatMap(([name, r]) => [
        [label[name] ?? name, "endpoint moved", ms(r.endpoint.p50), ms(r.endpoint.p90), ms(r.endpoint.p99), r.reloads],
        ["", "Service added", ms(r.added.p50), ms(r.added.p90), ms(r.added.p99), ""],
      ]),
    ),
  );
  console.log(
    `\nThe same burst for every policy: ${burstSize} endpoints moved and ${burstSize} Services added, each write sent when the one before was stored:\n`,
  );
  console.log(
    table(
      ["policy", "writes took", "all served after", "configs published", "HAProxy reloads"],
      Object.entries(sideBySide).map(([name, r]) => [
        label[name] ?? name,
        ms(r.burst.writtenMs),
        ms(r.burst.servedMs),
        r.burst.configs,
        r.burst.reloads,
      ]),
    ),
  );
  console.log("\nThe client polls through HAProxy every 5 ms; each figure includes that.\n");
  console.log(
    table(
      [`event storm: ${storm.events} update events for an unchanged object in ${storm.seconds} s`, "value"],
      [
        ["deliveries refused (non-2xx)", storm.failedDeliveries!],
        ["configs written", storm.configsWritten!],
        ["HAProxy reloads", storm.reloads!],
        ["runtime API updates", storm.runtimeUpdates!],
      ],
    ),
  );
}

/** How many of the slowest traced changes the stage table shows one by one. */
const SLOWEST_SHOWN = 3;

const revOfKey = (key: unknown) => Number(/(\d{20})-/.exec(String(key))?.[1] ?? NaN);

/**
 * Per change, the first trace record of each stage that belongs to it: the API server's write after
 * the PUT gives the cluster revision R; the bridge and reconcile events carry R; the pass is
 * the first to list a revision ≥ R; the agent's records name a key whose revision is ≥ R.
 */
function stages(records: TraceRecord[], marks: Array<{ edit: number; served: number }>) {
  const rows: Array<Record<string, number>> = [];
  let coalesced = 0;
  let agentBusy = 0;
  let headStarts = 0;
  for (const { edit, served } of marks) {
    const after = (ev: string, from: number, pred: (r: TraceRecord) => boolean = () => true) =>
      records.find((r) => r.ev === ev && r.at >= from && r.at <= served && pred(r));
    const write = after("write", edit);
    if (!write) continue;
    const R = Number(write.rv);
    const bridged = after("event", edit, (r) => r.proc === "bridge" && Number(r.rv) === R);
    const received = after("event", edit, (r) => r.proc === "reconcile" && Number(r.rv) === R);
    // A warm pass reads the named objects first (pass.read, its head start), then lists.
    const listed = records.find(
      (r) =>
        (r.ev === "pass.read" || r.ev === "pass.listed") && r.at >= edit && r.at <= served && Number(r.revision) >= R,
    );
    const n = listed?.n;
    const start = records.find((r) => r.ev === "pass.start" && r.n === n && r.at <= served);
    // A head start's turn to render and publish (renders and publishes take turns); a full pass has none.
    const turn = after("pass.turn", listed?.at ?? edit, (r) => r.n === n) ?? listed;
    const published =
      after("pass.published", listed?.at ?? edit, (r) => r.n === n && r.status === "published") ??
      after("pass.published", edit, (r) => r.n === n);
    const notified = after("pass.notified", published?.at ?? edit, (r) => r.n === n);
    // A head start publishes at the revision of the instance's last list, below R: its key is named.
    const mine = (r: TraceRecord) => r.key === published?.key || revOfKey(r.key) >= R;
    const pinged = after("notify", edit, (r) => r.proc === "agent" && mine(r));
    const pulled = after("pull.end", edit, mine);
    const pullStart = [...records].reverse().find((r) => r.ev === "pull.start" && pulled && r.at <= pulled.at);
    const runtime = after("runtime.done", edit, mine);
    if (received?.busy) coalesced++;
    if (pinged?.busy) agentBusy++;
    const t = {
      edit,
      write: write.at,
      bridged: bridged?.at,
      received: received?.at,
      start: start?.at,
      listed: listed?.at,
      turn: turn?.at,
      published: published?.at,
      notified: notified?.at,
      pinged: pinged?.at,
      pullStart: pullStart?.at,
      pulled: pulled?.at,
      runtime: runtime?.at,
      served,
    };
    if (Object.values(t).some((v) => v === undefined)) continue;
    if (published?.step === "head-start") headStarts++;
    rows.push(t as Record<string, number>);
  }
  const span = (from: string, to: string) => rows.map((r) => r[to]! - r[from]!);
  // The slowest changes, each stage of each: whether a tail is one stage or spread over all.
  const slowest = [...rows].sort((a, b) => b.served! - b.edit! - (a.served! - a.edit!)).slice(0, SLOWEST_SHOWN);
  const st = (stage: string, from: string, to: string, note = "") => {
    const v = span(from, to);
    return {
      stage,
      p50: v.length ? percentile(v, 50) : NaN,
      p99: v.length ? percentile(v, 99) : NaN,
      slowest: slowest.map((r) => r[to]! - r[from]!),
      note,
    };
  };
  return [
    st("write sent → API server stored it", "edit", "write"),
    st("emulator write → bridge has the watch event", "write", "bridged"),
    st("bridge → reconcile receives the CloudEvent", "bridged", "received"),
    st(
      "received → pass starts",
      "received",
      "start",
      `${coalesced} of ${rows.length} arrived during a pass (coalesced)`,
    ),
    st(
      "pass: read the named objects (head start) or list",
      "start",
      "listed",
      `${headStarts} of ${rows.length} published by the head start`,
    ),
    st("pass: waits its turn (another render or publish)", "listed", "turn"),
    st("pass: build + render + publish", "turn", "published"),
    st("pass: notify (ping answered)", "published", "notified"),
    st("publish done → agent has the ping", "published", "pinged"),
    st("ping → pull starts", "pinged", "pullStart", `${agentBusy} of ${rows.length} pings found the agent busy`),
    st("agent pull (the pin and the pinged key, a GET each)", "pullStart", "pulled"),
    st("pulled → runtime API done", "pulled", "runtime"),
    st("runtime API done → client sees it", "runtime", "served"),
    st("total: edit → served", "edit", "served", `${rows.length} of ${marks.length} changes fully traced`),
  ];
}

await main();
