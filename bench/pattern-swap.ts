/*
 * bench/pattern-swap: how long the agent takes to replace an allow list through HAProxy's
 * runtime API (prepare acl, batched add acl @<version>, read back, commit acl), by list length:
 * what bounds MAX_SOURCE_RANGES. One real HAProxy on loopback with one list.
 *   node dist/dev/bench/pattern-swap.js [--rounds 9]
 */

import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { swapPatternFile } from "../shared/adapters/haproxy/runtime.js";
import { renderPatternSection } from "../shared/core/haproxy-config/pattern-files.js";
import { runHaproxy } from "../test/support/haproxy.js";
import { arg, machine, percentile, table } from "./machine.js";

const rounds = arg("--rounds", 9);
const SIZES = [10, 100, 1000, 10_000];
const PATH = "patterns/default.web.allow";

/** `n` distinct /24s, different for each round, so that every swap replaces the whole list. */
const list = (n: number, round: number) =>
  Array.from({ length: n }, (_, i) => `${10 + (round % 200)}.${i >> 8}.${i & 255}.0/24`);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bench-pattern-swap-"));
  const socket = join(dir, "admin.sock");
  const config = `global
    stats socket ${socket} mode 600 level admin

defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s

global
    default-path config

backend web
    acl src_allowed src -f ${PATH}
    http-request deny deny_status 403 unless src_allowed
${renderPatternSection([{ path: PATH, entries: list(1, 0) }])}`;
  const haproxy = await runHaproxy(config, dir);
  const rows: string[][] = [];
  try {
    let round = 1;
    for (const n of SIZES) {
      const times: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const entries = list(n, round++);
        const t0 = performance.now();
        await swapPatternFile(socket, { path: PATH, entries });
        times.push(performance.now() - t0);
      }
      const ms = (x: number) => `${x.toFixed(1)} ms`;
      rows.push([String(n), ms(Math.min(...times)), ms(percentile(times, 50)), ms(Math.max(...times))]);
    }
  } finally {
    await haproxy.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `bench/pattern-swap — ${machine()}, load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(`${rounds} swaps per size, each replacing the whole list\n`);
  console.log(table(["entries", "min", "median", "max"], rows));
}

await main();
