/*
 * bench/store-delta: what one config change costs in the store, per agent and per publish, with
 * configs published whole and in chunks (core/publish/content-chunks.ts), on the in-memory blob store
 * (requests and bytes are the protocol's, not a server's):
 *   node dist/dev/bench/store-delta.js [--json] [--sizes 1000,10000] [--changes 5]
 * For each size: a cold agent's first pull; then per change kind, `--changes` changes in a row, each
 * published, then pulled by an agent that runs the config before (GET requests and bytes it
 * downloads, the time to assemble and verify the whole config against its tree1 digest) and by one
 * restarted on it (its chunks cut again from the text it runs).
 */
import { loadavg } from "node:os";
import { createMemoryBlobStore } from "../shared/adapters/memory-blob-store.js";
import { createStore } from "../shared/adapters/store.js";
import { CHANGES, type Change, changed, renderConfig } from "./config-changes.js";
import { arg, machine, percentile, table } from "./machine.js";

interface Row {
  services: number;
  format: "whole" | "chunks1";
  change: Change | "cold agent";
  agentRequests: number;
  agentBytes: number;
  restartedBytes: number | null;
  publishRequests: number | null;
  publishBytes: number | null;
  pullMs: number;
}

async function measure(services: number, changes: number, chunked: boolean): Promise<Row[]> {
  const blobs = createMemoryBlobStore();
  const view = () => createMemoryBlobStore({ objects: blobs.objects });
  const publisherBlobs = view();
  const publisher = createStore(publisherBlobs);
  const agentBlobs = view();
  const agent = createStore(agentBlobs);
  const format = chunked ? "chunks1" : "whole";
  let revision = 1000;
  let config = renderConfig(services);
  const publish = async (text: string) => {
    publisherBlobs.resetTraffic();
    const r = await publisher.publish({
      config: text,
      digest: "tree1",
      revision: String(++revision),
      generator: "bench",
      chunked,
    });
    if (r.status !== "published") throw new Error(`publish: ${r.status}`);
    const t = publisherBlobs.traffic;
    return { key: r.key, requests: t.requests.put, bytes: t.bytesIn };
  };
  const pull = async (key: string, have: string | undefined, fresh = false) => {
    const reader = fresh ? createStore(view()) : agent;
    const blobsOf = fresh ? null : agentBlobs;
    blobsOf?.resetTraffic();
    const t0 = performance.now();
    const got = await reader.get(key, { have });
    const ms = performance.now() - t0;
    if (got.config !== (await publisher.get(key)).config) throw new Error("assembled config differs");
    return { ms, requests: blobsOf?.traffic.requests.get ?? 0, bytes: blobsOf?.traffic.bytesOut ?? 0 };
  };
  const rows: Row[] = [];
  const first = await publish(config);
  agentBlobs.resetTraffic();
  const cold = await pull(first.key, undefined);
  rows.push({
    services,
    format,
    change: "cold agent",
    agentRequests: cold.requests,
    agentBytes: cold.bytes,
    restartedBytes: null,
    publishRequests: first.requests,
    publishBytes: first.bytes,
    pullMs: Math.round(cold.ms * 10) / 10,
  });
  for (const change of CHANGES) {
    const req: number[] = [];
    const bytes: number[] = [];
    const restarted: number[] = [];
    const pubReq: number[] = [];
    const pubBytes: number[] = [];
    const ms: number[] = [];
    for (let i = 0; i < changes; i++) {
      const before = config;
      config = changed(config, change, (i + 1) / (changes + 1), revision);
      const published = await publish(config);
      pubReq.push(published.requests);
      pubBytes.push(published.bytes);
      const warm = await pull(published.key, before);
      req.push(warm.requests);
      bytes.push(warm.bytes);
      ms.push(warm.ms);
      // The same pull by an agent restarted on `before`: nothing held but the text it runs.
      const again = createMemoryBlobStore({ objects: blobs.objects });
      await createStore(again).get(published.key, { have: before });
      restarted.push(again.traffic.bytesOut);
    }
    rows.push({
      services,
      format,
      change,
      agentRequests: Math.max(...req),
      agentBytes: Math.max(...bytes),
      restartedBytes: Math.max(...restarted),
      publishRequests: Math.max(...pubReq),
      publishBytes: Math.max(...pubBytes),
      pullMs: Math.round(percentile(ms, 50) * 10) / 10,
    });
  }
  return rows;
}

async function main(): Promise<void> {
  const sizesAt = process.argv.indexOf("--sizes");
  const sizes = (sizesAt >= 0 ? process.argv[sizesAt + 1]! : "1000,10000").split(",").map(Number);
  const changes = arg("--changes", 5);
  const loadBefore = loadavg()[0]!;
  const rows: Row[] = [];
  for (const services of sizes)
    for (const chunked of [false, true]) rows.push(...(await measure(services, changes, chunked)));
  const load = `load average (1 min) ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after`;
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify({ machine: machine(), load, rows }, null, 2)}\n`);
    return;
  }
  console.log(`bench/store-delta — ${machine()}; ${load}`);
  console.log(`per change: the worst of ${changes} in a row; pull ms: median, GET to verified text\n`);
  console.log(
    table(
      [
        "services",
        "format",
        "change",
        "agent GETs",
        "agent bytes",
        "restarted agent bytes",
        "publish PUTs",
        "publish bytes",
        "pull ms",
      ],
      rows.map((r) => [
        r.services,
        r.format,
        r.change,
        r.agentRequests,
        r.agentBytes,
        r.restartedBytes ?? "",
        r.publishRequests ?? "",
        r.publishBytes ?? "",
        r.pullMs,
      ]),
    ),
  );
}

await main();
