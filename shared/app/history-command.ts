import { OptionsError } from "../core/options.js";
import { unifiedDiff } from "../core/line-diff.js";
import { createLogger } from "../adapters/log.js";
import type { HistoryEntry, ObjectStore } from "../adapters/object-store.js";
import { loadFunctionSettings } from "./function-options.js";
import { createReconciler, openStore } from "./reconcile.js";

/**
 * `servicelb history`, `servicelb diff A B` and `servicelb reconcile --once`: the operator's view
 * of the published configs (invariant 6), with the same settings (flags, SERVICELB_*, config file)
 * as the functions. Each returns the exit code; output goes to stdout, logs to stderr.
 */

/** `servicelb history [--limit N] [--format text|json]`: newest first. */
export async function runHistory(flags: Record<string, unknown>): Promise<number> {
  const limit = flags.limit === undefined ? 20 : Number(flags.limit);
  if (!Number.isInteger(limit) || limit < 0) throw new OptionsError(`--limit: ${String(flags.limit)} is not a whole number ≥ 0`);
  return withStore(flags, async (store) => {
    const entries = await store.history({ limit: limit === 0 ? undefined : limit });
    process.stdout.write(flags.format === "json" ? `${JSON.stringify(entries, null, 2)}\n` : formatHistory(entries));
    return 0;
  });
}

/** `servicelb diff A B`: a unified diff of two published configs (empty when they are equal). */
export async function runDiff(from: string, to: string, flags: Record<string, unknown>): Promise<number> {
  return withStore(flags, async (store) => {
    const entries = await store.history();
    const [a, b] = await Promise.all([store.get(resolveConfigRef(from, entries)), store.get(resolveConfigRef(to, entries))]);
    process.stdout.write(unifiedDiff(a.config, b.config, { fromLabel: a.key, toLabel: b.key }));
    return 0;
  });
}

/** `servicelb reconcile --once`: one full pass from a shell; prints the result as JSON. */
export async function runReconcileOnce(flags: Record<string, unknown>): Promise<number> {
  const reconciler = createReconciler(loadFunctionSettings(process.env, flags), { log: createLogger("reconcile") });
  try {
    const result = await reconciler.reconcileNow({ id: `cli-${process.pid}-${Date.now()}`, type: "servicelb.cli.reconcile" });
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } finally {
    reconciler.close();
  }
}

/**
 * A config named the way an operator would: its full key, its file name, its snapshot revision,
 * `latest`, or `latest~N` (N configs before the newest, as in git).
 */
export function resolveConfigRef(ref: string, entries: readonly HistoryEntry[]): string {
  const back = /^latest(?:~([0-9]+))?$/.exec(ref);
  if (back) {
    const n = Number(back[1] ?? 0);
    const entry = entries[n];
    if (!entry) throw new OptionsError(`${ref}: the store holds ${entries.length} config(s)`);
    return entry.key;
  }
  const matches = /^[0-9]+$/.test(ref)
    ? entries.filter((e) => e.revision === BigInt(ref).toString())
    : entries.filter((e) => e.key === ref || e.key.endsWith(`/${ref}`));
  if (matches.length === 1) return matches[0]!.key;
  if (matches.length > 1) throw new OptionsError(`${ref} names ${matches.length} configs (${matches.map((e) => e.key).join(", ")}): give the key`);
  throw new OptionsError(`${ref}: no such config in the store (see servicelb history)`);
}

export function formatHistory(entries: readonly HistoryEntry[]): string {
  const rows = [
    ["REVISION", "SHA256", "BYTES", "PUBLISHED", "KEY"],
    ...entries.map((e) => [e.revision, e.sha256Prefix, String(e.size), e.lastModified.toISOString(), e.key]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ")).join("\n") + "\n";
}

async function withStore(flags: Record<string, unknown>, run: (store: ObjectStore) => Promise<number>): Promise<number> {
  const store = openStore(loadFunctionSettings(process.env, flags));
  try {
    return await run(store);
  } finally {
    store.close();
  }
}
