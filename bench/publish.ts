/*
 * bench/publish: the store's publish of a rendered config (its listings, its PUT), against s3rver
 * on loopback, at each size, with config bodies sent unsigned (as servicelb sends them) and
 * signed (SigV4 hashes the whole body), side by side in one run. Both go through the same proxy;
 * for the signed rows it refuses unsigned bodies, so the store signs them from then on, as it
 * does for a store that does not take them.
 *   node dist/dev/bench/publish.js [--json] [--sizes 1000,10000] [--publishes 40]
 * s3rver runs in this process: the CPU column is the publisher's and the store's together.
 */
import { loadavg } from "node:os";
import { createObjectStore } from "../shared/adapters/store.js";
import { loadTemplates } from "../shared/adapters/templates.js";
import { buildModel } from "../shared/core/model/build-model.js";
import { configHasher } from "../shared/core/publish/config-digest.js";
import { parseRenderOptions } from "../shared/core/settings/options.js";
import { Renderer } from "../shared/core/render/render.js";
import { dripProxy } from "../test/support/drip.js";
import { S3RVER_CREDENTIALS, startS3 } from "../test/support/s3.js";
import { arg, machine, percentile, table } from "./machine.js";
import { syntheticSnapshot } from "./synthetic.js";

const ENDPOINTS = 10;
const WARM_UP = 5;

interface Row {
  services: number;
  bodies: "unsigned" | "signed";
  bytes: number;
  publishes: number;
  p50: number;
  p99: number;
  cpuMsPerPublish: number;
}

/** A config of `services` Services, rendered once: each publish adds a line, so that each is a new config. */
function baseConfig(services: number) {
  const snapshot = syntheticSnapshot(services, ENDPOINTS);
  return new Renderer(loadTemplates()).renderChunks(buildModel(snapshot, parseRenderOptions({ minServerSlots: 1 })));
}

async function main(): Promise<void> {
  const sizesAt = process.argv.indexOf("--sizes");
  const sizes = (sizesAt >= 0 ? process.argv[sizesAt + 1]! : "1000,10000").split(",").map(Number);
  const publishes = arg("--publishes", 40);
  const s3 = await startS3();
  const proxy = await dripProxy(s3.endpoint);
  const hasher = configHasher("tree1");
  const rows: Row[] = [];
  const loadBefore = loadavg()[0]!;
  try {
    // The two kinds take turns, publish by publish, so that neither has the JIT or the machine to itself.
    proxy.mode = (req) =>
      req.url?.includes("/signed-") &&
      req.method === "PUT" &&
      req.headers["x-amz-content-sha256"] === "UNSIGNED-PAYLOAD"
        ? "refuse"
        : "pass";
    for (const services of sizes) {
      const base = baseConfig(services);
      const kinds = (["unsigned", "signed"] as const).map((bodies) => ({
        bodies,
        store: createObjectStore({
          url: `s3://${s3.bucket}/${bodies}-${services}/`,
          endpoint: proxy.endpoint,
          forcePathStyle: true,
          credentials: S3RVER_CREDENTIALS,
        }),
        times: [] as number[],
        cpuMs: 0,
      }));
      let bytes = 0;
      for (let i = 0; i < WARM_UP + publishes; i++) {
        const chunks = [...base.chunks, Buffer.from(`# publish ${i}\n`)];
        const config = { chunks, byteLength: base.byteLength + chunks.at(-1)!.length, sha256: hasher.digest(chunks) };
        bytes = config.byteLength;
        for (const kind of kinds) {
          const cpu = process.cpuUsage();
          const t0 = performance.now();
          const result = await kind.store.publish({ config, revision: String(1000 + i), generator: "bench/publish" });
          const ms = performance.now() - t0;
          const used = process.cpuUsage(cpu);
          if (result.status !== "published") throw new Error(`publish ${i}: ${result.status}`);
          if (i < WARM_UP) continue;
          kind.times.push(ms);
          kind.cpuMs += (used.user + used.system) / 1000;
        }
      }
      for (const { bodies, store, times, cpuMs } of kinds) {
        store.close();
        rows.push({
          services,
          bodies,
          bytes,
          publishes,
          p50: Math.round(percentile(times, 50) * 10) / 10,
          p99: Math.round(percentile(times, 99) * 10) / 10,
          cpuMsPerPublish: Math.round((cpuMs / publishes) * 10) / 10,
        });
      }
    }
  } finally {
    await proxy.stop();
    await s3.stop();
  }
  const load = `load average (1 min) ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after`;
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify({ machine: machine(), load, rows }, null, 2)}\n`);
    return;
  }
  console.log(`bench/publish — ${machine()}; ${load}`);
  console.log(
    `one publish per config (listings + PUT) to s3rver through a pass-through proxy, ${publishes} timed after ${WARM_UP}\n`,
  );
  console.log(
    table(
      ["services", "config bodies", "config bytes", "p50 ms", "p99 ms", "CPU ms / publish (with s3rver)"],
      rows.map((r) => [r.services, r.bodies, r.bytes, r.p50, r.p99, r.cpuMsPerPublish]),
    ),
  );
}

await main();
