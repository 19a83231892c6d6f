import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { agentOptionSpecs } from "../../shared/agent/options.js";
import { clusterSettingSpecs, functionSettingSpecs } from "../../shared/app/function-options.js";
import { ANNOTATION_PREFIX, ANNOTATIONS } from "../../shared/core/model/annotations.js";
import { SETTING_ANNOTATIONS } from "../../shared/core/model/backend-settings.js";
import { optionSpecs } from "../../shared/core/settings/options.js";
import { envName, flagName, type SettingSpecs } from "../../shared/core/settings/settings.js";
import { codeSpans, section, tableRows } from "../support/markdown.js";
import { REPO } from "../support/infra-manifests.js";

// The reference tables of docs/ against the specs in the code, both ways: a setting or an
// annotation the code reads is in its table, and a table names nothing the code does not read.

const doc = (name: string) => readFileSync(join(REPO, "docs", name), "utf8");
const sorted = (names: Iterable<string>) => [...new Set(names)].sort();

/** The names a spec gives its users: the flag, or the variable alone for a secret. */
function flags(specs: SettingSpecs): string[] {
  return Object.entries(specs).map(([key, spec]) => (spec.envOnly ? envName(key) : `--${flagName(key)}`));
}

describe("docs/annotations.md", () => {
  const text = doc("annotations.md");
  const named = (anchor: string) =>
    tableRows(section(text, anchor, true)).map((row) => {
      const [name] = codeSpans(row[0]!);
      expect(name, `first cell of ${row.join(" | ")}`).toMatch(/^lb\./);
      return `${ANNOTATION_PREFIX}${name}`;
    });

  it("has a row for every routing annotation, and no other", () => {
    expect(sorted(named("annotations"))).toEqual(sorted(Object.values(ANNOTATIONS)));
  });

  it("has a row for every per-Service setting, and no other", () => {
    expect(sorted(named("per-service-settings"))).toEqual(sorted(Object.values(SETTING_ANNOTATIONS)));
  });
});

describe("docs/configuration.md", () => {
  const text = doc("configuration.md");

  it("lists every render option with its flag and variable, and no other", () => {
    const rows = tableRows(section(text, "render-options"));
    const listed = rows.flatMap((row) => codeSpans(row[0]!));
    expect(sorted(listed)).toEqual(sorted(flags({ ...optionSpecs, ...clusterSettingSpecs })));
    for (const row of rows) {
      const variables = codeSpans(row[0]!).map((flag) =>
        envName(flag.slice(2).replace(/-([a-z])/g, (_, c) => c.toUpperCase())),
      );
      expect(codeSpans(row[1]!), `variables of ${row[0]}`).toEqual(variables);
    }
  });

  it("lists every other setting of the functions by its variable, and no other", () => {
    const listed = tableRows(section(text, "the-functions")).flatMap((row) => codeSpans(row[0]!));
    const others = Object.keys(functionSettingSpecs).filter((k) => !(k in optionSpecs || k in clusterSettingSpecs));
    expect(sorted(listed)).toEqual(sorted(others.map(envName)));
  });

  it("lists every flag of the agent, and no other", () => {
    const listed = tableRows(section(text, "the-node-agent")).flatMap((row) => codeSpans(row[0]!));
    expect(sorted(listed)).toEqual(sorted(flags(agentOptionSpecs)));
  });
});
