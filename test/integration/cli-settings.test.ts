import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { agentOptionSpecs } from "../../shared/agent/options.js";
import { clusterSettingSpecs, notifySettingSpecs } from "../../shared/app/function-options.js";
import { optionSpecs } from "../../shared/core/settings/options.js";
import { flagName, flagSyntax, type SettingSpecs } from "../../shared/core/settings/settings.js";
import { storeRetainSpec, storeSettingSpecs } from "../../shared/core/settings/store-settings.js";

const root = join(import.meta.dirname, "..", "..");

/** `servicelb <command> --help` with its wrapping undone, so a help text reads as one line. */
function help(command: string): string {
  const r = spawnSync(process.execPath, [join(root, "bin", "servicelb.js"), command, "--help"], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root" },
  });
  expect(r.status).toBe(0);
  return r.stdout.replace(/\s+/g, " ");
}

const render: SettingSpecs = { ...optionSpecs, ...clusterSettingSpecs };

describe("servicelb's flags come from the setting specs", () => {
  it.each([
    ["render", render],
    ["reconcile", { ...render, ...storeSettingSpecs, storeRetain: storeRetainSpec, ...notifySettingSpecs }],
    ["history", storeSettingSpecs],
    ["diff", storeSettingSpecs],
    ["pin", storeSettingSpecs],
    ["unpin", storeSettingSpecs],
    ["status", storeSettingSpecs],
    ["agent", agentOptionSpecs],
  ] as Array<[string, SettingSpecs]>)("%s lists each of its settings with the spec's help", (command, specs) => {
    const text = help(command);
    for (const [key, spec] of Object.entries(specs)) {
      const syntax = flagSyntax(key, spec);
      if (syntax === undefined) expect(text).not.toMatch(new RegExp(`--${flagName(key)}[ <]`));
      else expect(text).toContain(`${syntax} ${spec.help.replace(/\s+/g, " ")}`);
    }
  });
});
