/*
 * `servicelb reconcile --once` renders with the settings recorded with the store's newest config
 * (those of the deployed function), so that a pass from a shell does not override the function's
 * ports, addresses or algorithm with the CLI's defaults. Options given explicitly (flag, variable,
 * config file) still win, and every difference from the recorded settings is reported.
 */

import { mergeSettingSources } from "../adapters/setting-sources.js";
import { StoreError, type ObjectStore } from "../adapters/store.js";
import { parseRenderOptions, pickRenderOptions, type RenderOptions } from "../core/settings/options.js";
import {
  diffSettings,
  settingsRecord,
  type SettingsChange,
  type SettingsRecord,
} from "../core/settings/settings-record.js";
import { functionSettingSpecs } from "./function-options.js";
import { templateRecord } from "./render-context.js";

export interface RecordedSettings {
  options: RenderOptions;
  /** Where the settings came from: the config they were recorded with; null: nothing recorded. */
  from: { key: string; digest: string } | null;
  /** What this pass renders differently from the recorded settings. */
  differs: SettingsChange[];
}

export async function withRecordedSettings(
  store: Pick<ObjectStore, "latest" | "readSettings">,
  own: { options: RenderOptions; template?: string },
  sources: { env: Readonly<Record<string, string | undefined>>; flags: Readonly<Record<string, unknown>> },
): Promise<RecordedSettings> {
  const newest = await store.latest();
  let recorded: SettingsRecord | null = null;
  if (newest?.settingsDigest) {
    try {
      recorded = await store.readSettings(newest.settingsDigest);
    } catch (err) {
      if (!(err instanceof StoreError) || err.transient) throw err;
    }
  }
  if (!newest || !recorded) return { options: own.options, from: null, differs: [] };
  const given = pickRenderOptions(
    mergeSettingSources({ specs: functionSettingSpecs, env: sources.env, flags: sources.flags }),
  );
  const options = parseRenderOptions({ ...recorded.options, ...given });
  const differs = diffSettings(recorded, settingsRecord(options, templateRecord(own.template)));
  return { options, from: { key: newest.key, digest: newest.settingsDigest! }, differs };
}
