/*
 * `servicelb history` and `servicelb diff A B`: the operator's view of the published configs
 * (docs/design.md#invariant-6-history), with the same settings (flags, SERVICELB_*, config file)
 * as the functions. Each returns the exit code; output goes to stdout.
 */

import { OptionsError } from "../core/settings/settings.js";
import { unifiedDiff } from "../core/publish/line-diff.js";
import type { ConfigHead, HistoryEntry, ObjectStore } from "../adapters/store.js";
import { diffSettings, type SettingsChange, type SettingsRecord } from "../core/settings/settings-record.js";
import { loadFunctionSettings, requireStore } from "./function-options.js";
import { formatTable } from "./text-table.js";
import { openStore } from "../adapters/open-store.js";
import { errorMessage } from "../core/error-message.js";

/** A history entry with what its metadata says: who produced it and with which settings, or why it cannot be trusted. */
export interface DescribedEntry extends HistoryEntry {
  producer: string | null;
  settingsDigest: string | null;
  /** The key is not trusted (core/publish/key-trust.ts) or its object does not verify: publishers and agents skip it. */
  problem: string | null;
  pinned: boolean;
}

/** `servicelb history [--limit N] [--format text|json]`: newest first, in decision order. */
export async function runHistory(flags: Record<string, unknown>): Promise<number> {
  const limit = flags.limit === undefined ? 20 : Number(flags.limit);
  if (!Number.isInteger(limit) || limit < 0)
    throw new OptionsError(`--limit: ${String(flags.limit)} is not a whole number ≥ 0`);
  return withStore(flags, async (store) => {
    const [entries, pin] = await Promise.all([
      store.history({ limit: limit === 0 ? undefined : limit }),
      store.getPin(),
    ]);
    const described = await Promise.all(
      entries.map(async (e): Promise<DescribedEntry> => {
        const head =
          e.untrusted !== undefined
            ? `not trusted: ${e.untrusted}`
            : await store.head(e.key).catch((err: unknown) => errorMessage(err));
        const ok = typeof head !== "string";
        return {
          ...e,
          producer: ok ? head.generator : null,
          settingsDigest: ok ? head.settingsDigest : null,
          problem: ok ? null : head,
          pinned: pin?.key === e.key,
        };
      }),
    );
    process.stdout.write(
      flags.format === "json" ? `${JSON.stringify(described, null, 2)}\n` : formatHistory(described),
    );
    return 0;
  });
}

/**
 * `servicelb diff A B [--settings]`: a unified diff of two published configs (empty when they are
 * equal); with --settings, what differs between the settings they were rendered with.
 */
export async function runDiff(from: string, to: string, flags: Record<string, unknown>): Promise<number> {
  return withStore(flags, async (store) => {
    const entries = await store.history();
    const [fromKey, toKey] = [resolveConfigRef(from, entries), resolveConfigRef(to, entries)];
    if (flags.settings === true) {
      const [a, b] = await Promise.all([recordedSettings(store, fromKey), recordedSettings(store, toKey)]);
      process.stdout.write(formatSettingsDiff(fromKey, toKey, diffSettings(a, b)));
      return 0;
    }
    const [a, b] = await Promise.all([store.get(fromKey), store.get(toKey)]);
    process.stdout.write(unifiedDiff(a.config, b.config, { fromLabel: a.key, toLabel: b.key }));
    return 0;
  });
}

async function recordedSettings(store: ObjectStore, key: string): Promise<SettingsRecord> {
  const head: ConfigHead = await store.head(key);
  if (!head.settingsDigest)
    throw new OptionsError(`${key} records no settings (published before servicelb recorded them, or by hand)`);
  return store.readSettings(head.settingsDigest);
}

export function formatSettingsDiff(fromKey: string, toKey: string, changes: readonly SettingsChange[]): string {
  const value = (v: SettingsChange["from"]) => (v === undefined ? "(unset)" : String(v));
  return `--- ${fromKey}\n+++ ${toKey}\n${changes.map((c) => `${c.setting}: ${value(c.from)} → ${value(c.to)}\n`).join("")}`;
}

/**
 * A config named the way an operator would: its full key, its file name, its snapshot revision,
 * `latest`, or `latest~N` (N trusted configs before the newest, as in git: a key nobody follows
 * is no step back).
 */
export function resolveConfigRef(ref: string, entries: readonly HistoryEntry[]): string {
  const back = /^latest(?:~([0-9]+))?$/.exec(ref);
  if (back) {
    const n = Number(back[1] ?? 0);
    const trusted = entries.filter((e) => e.untrusted === undefined);
    const entry = trusted[n];
    if (!entry) throw new OptionsError(`${ref}: the store holds ${trusted.length} trusted config(s)`);
    return entry.key;
  }
  const matches = /^[0-9]+$/.test(ref)
    ? entries.filter((e) => e.revision === BigInt(ref).toString())
    : entries.filter((e) => e.key === ref || e.key.endsWith(`/${ref}`));
  if (matches.length === 1) return matches[0]!.key;
  if (matches.length > 1)
    throw new OptionsError(
      `${ref} names ${matches.length} configs (${matches.map((e) => e.key).join(", ")}): give the key`,
    );
  throw new OptionsError(`${ref}: no such config in the store (see servicelb history)`);
}

export function formatHistory(entries: readonly DescribedEntry[]): string {
  const rows = [
    ["EPOCH", "REVISION", "SEQ", "DIGEST", "PRODUCER", "SETTINGS", "BYTES", "PUBLISHED", "KEY"],
    ...entries.map((e) => [
      String(e.epoch),
      e.revision,
      String(e.seq),
      e.sha256Prefix,
      e.producer || "-",
      e.settingsDigest ?? "-",
      String(e.size),
      e.lastModified.toISOString(),
      `${e.key}${e.pinned ? "  (pinned)" : ""}${e.problem ? `  SKIPPED: ${e.problem}` : ""}`,
    ]),
  ];
  return `${formatTable(rows)}\n`;
}

/** The store the flags (or environment) name, closed after `run`. */
export async function withStore(
  flags: Record<string, unknown>,
  run: (store: ObjectStore) => Promise<number>,
): Promise<number> {
  const store = openStore(requireStore(loadFunctionSettings(process.env, flags)));
  try {
    return await run(store);
  } finally {
    store.close();
  }
}
