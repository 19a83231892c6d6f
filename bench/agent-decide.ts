/*
 * bench/agent-decide: the CPU an agent spends deciding how to take a change, per change, at N
 * Services — what every node of a fleet spends on every change beside the pull: the new config
 * parsed (core/haproxy-config/parse.ts; the running one is held parsed from the change before, as
 * the agent's configParser holds it) and decideApply (agent/decide.ts) against the running one.
 * The changes are bench/config-changes.ts's, `--changes` of each kind in a row at spread positions.
 * With `--compare <dir>` (another checkout's development build, e.g. /work/wt-base/dist/dev) the
 * same changes go through that build's parse and decide too, in turns, and both are printed side
 * by side; the two builds' decisions must agree.
 *   node dist/dev/bench/agent-decide.js [--sizes 1000,10000,50000] [--changes 20] [--compare <dir>] [--json]
 */
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { decideApply } from "../shared/agent/decide.js";
import { configParser } from "../shared/core/haproxy-config/parse.js";
import { CHANGES, type Change, changed, renderConfig } from "./config-changes.js";
import { arg, machine, percentile, table } from "./machine.js";

interface Build {
  name: string;
  parser: typeof configParser;
  decide: typeof decideApply;
}

interface Row {
  services: number;
  change: Change;
  build: string;
  decision: string;
  p50: number;
  p99: number;
  max: number;
}

const argText = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

async function builds(): Promise<Build[]> {
  const own: Build = { name: "this build", parser: configParser, decide: decideApply };
  const other = argText("--compare");
  if (other === undefined) return [own];
  const at = (path: string) => pathToFileURL(join(resolve(other), path)).href;
  const parse = (await import(at("shared/core/haproxy-config/parse.js"))) as { configParser: typeof configParser };
  const decide = (await import(at("shared/agent/decide.js"))) as { decideApply: typeof decideApply };
  return [own, { name: other, parser: parse.configParser, decide: decide.decideApply }];
}

/** Each build takes the same changes in a row with its own parser, in turns; ms per change. */
function measure(services: number, change: Change, changes: number, list: Build[]): Row[] {
  let config = renderConfig(services);
  const agents = list.map((b) => {
    const parse = b.parser({});
    parse(config);
    return { build: b, parse, running: config, ms: [] as number[], kinds: new Set<string>() };
  });
  for (let n = 1; n <= changes; n++) {
    // As an agent holds it: text decoded from the bytes it pulled, not built by concatenation.
    config = Buffer.from(changed(config, change, n / (changes + 1), n)).toString("utf8");
    const decisions: string[] = [];
    for (const agent of n % 2 === 0 ? [...agents].reverse() : agents) {
      const t0 = performance.now();
      const decision = agent.build.decide({ config: agent.parse(agent.running), known: true }, agent.parse(config));
      agent.ms.push(performance.now() - t0);
      agent.running = config;
      agent.kinds.add(decision.kind);
      decisions.push(JSON.stringify(decision));
    }
    if (new Set(decisions).size > 1) throw new Error(`the builds decide ${change} ${n} differently`);
  }
  const round = (x: number) => Math.round(x * 100) / 100;
  return agents.map((a) => ({
    services,
    change,
    build: a.build.name,
    decision: [...a.kinds].join(", "),
    p50: round(percentile(a.ms, 50)),
    p99: round(percentile(a.ms, 99)),
    max: round(Math.max(...a.ms)),
  }));
}

async function main(): Promise<void> {
  const sizes = (argText("--sizes") ?? "1000,10000,50000").split(",").map(Number);
  const changes = arg("--changes", 20);
  const list = await builds();
  const loadBefore = loadavg()[0]!;
  const rows: Row[] = [];
  for (const services of sizes) for (const change of CHANGES) rows.push(...measure(services, change, changes, list));
  const load = `load average (1 min) ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after`;
  if (process.argv.includes("--json")) {
    process.stdout.write(`${JSON.stringify({ machine: machine(), load, changes, rows }, null, 2)}\n`);
    return;
  }
  console.log(`bench/agent-decide — ${machine()}; ${load}`);
  console.log(`ms per change to parse the new config and decide against the running one; ${changes} changes each\n`);
  console.log(
    table(
      ["services", "change", "build", "decision", "p50 ms", "p99 ms", "max ms"],
      rows.map((r) => [r.services, r.change, r.build, r.decision, r.p50, r.p99, r.max]),
    ),
  );
}

await main();
