/*
 * The settings that shaped a config, recorded with it in the store (docs/design.md#invariant-6-history; issue 11):
 * the render options as they would be typed (so they can be parsed again) and the template's
 * digest. No secrets: render options hold paths and names, never passwords or tokens (the stats
 * password is read by HAProxy on the node, the notify token is not a render option).
 */

import { z } from "zod";
import { compareStrings } from "../compare.js";
import { hostText } from "../model/host-match.js";
import { formatLabelSelector } from "../kubernetes/label-selector.js";
import { optionSpecs, type RenderOptions } from "./options.js";
import { sha256, sha256Schema } from "../publish/sha256.js";

export const settingsRecordSchema = z.object({
  /** Render options in their input form (flag values), keyed by their camelCase names. */
  options: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  template: z.object({
    /** "built-in" or the main template's path where it was rendered. */
    source: z.string(),
    /** sha256 of the template files, so that another template with the same path is told apart. */
    sha256: sha256Schema,
  }),
});

export type SettingsRecord = z.infer<typeof settingsRecordSchema>;

export interface SettingsChange {
  setting: string;
  from: string | number | boolean | undefined;
  to: string | number | boolean | undefined;
}

/** The input form of each option that has a value: parseRenderOptions(record.options) gives `options` back. */
export function settingsRecord(options: RenderOptions, template: SettingsRecord["template"]): SettingsRecord {
  const input: Record<string, string | number | boolean> = {};
  for (const key of Object.keys(optionSpecs).sort() as Array<keyof RenderOptions>) {
    const value = options[key];
    if (value === undefined) continue;
    if (key === "selector") input[key] = formatLabelSelector(options.selector!);
    else if (key === "tcpServices") {
      if (options.tcpServices.length > 0) input[key] = options.tcpServices.map((t) => `${t.ref}:${t.port}`).join(",");
    } else if (key === "acceptProxy" || key === "allowSourceRange" || key === "denySourceRange")
      input[key] = options[key]!.join(",");
    else if (key === "ownHosts") input[key] = options.ownHosts!.map(hostText).join(",");
    else if (key === "hostClaims") {
      const claims = Object.entries(options.hostClaims!).sort(([a], [b]) => compareStrings(a, b));
      input[key] = JSON.stringify(Object.fromEntries(claims.map(([ns, hosts]) => [ns, hosts.map(hostText)])));
    } else input[key] = value as string | number | boolean;
  }
  return { options: input, template };
}

/** 16 hex digits of the sha256 of the record's canonical JSON (sorted option keys). */
export function settingsDigest(record: SettingsRecord): string {
  const options = Object.fromEntries(Object.entries(record.options).sort(([a], [b]) => compareStrings(a, b)));
  return sha256(JSON.stringify({ options, template: record.template })).slice(0, 16);
}

/** What differs from `from` to `to`, one entry per setting, sorted by name. */
export function diffSettings(from: SettingsRecord, to: SettingsRecord): SettingsChange[] {
  const changes: SettingsChange[] = [];
  const keys = [...new Set([...Object.keys(from.options), ...Object.keys(to.options)])].sort();
  for (const key of keys)
    if (from.options[key] !== to.options[key])
      changes.push({ setting: key, from: from.options[key], to: to.options[key] });
  if (from.template.sha256 !== to.template.sha256 || from.template.source !== to.template.source) {
    changes.push({
      setting: "template",
      from: `${from.template.source} (${from.template.sha256.slice(0, 12)})`,
      to: `${to.template.source} (${to.template.sha256.slice(0, 12)})`,
    });
  }
  return changes;
}
