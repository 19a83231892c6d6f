import { cpus, totalmem } from "node:os";

/** One line that says where a figure was measured. */
export function machine(): string {
  const cpu = cpus();
  return `${cpu[0]?.model.trim() ?? "unknown CPU"}, ${cpu.length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${process.platform}/${process.arch}`;
}

export function table(headers: string[], rows: Array<Array<string | number>>): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  return [
    line(headers),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...rows.map((r) => line(r.map(String))),
  ].join("\n");
}

export function mib(bytes: number): number {
  return Math.round((bytes / 2 ** 20) * 10) / 10;
}

/** Nearest-rank percentile: with fewer than 100 samples, p99 is the largest. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** A numeric flag of a benchmark (`--services 1000`), or its default. */
export function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/** Seeded uniform [0, 1) (mulberry32): the same sequence in every run and for every variant. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
