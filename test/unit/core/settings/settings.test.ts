import { describe, expect, it } from "vitest";
import { z } from "zod";
import { agentOptionSpecs } from "../../../../shared/agent/options.js";
import {
  clusterSettingSpecs,
  functionSettingSpecs,
  notifySettingSpecs,
} from "../../../../shared/app/function-options.js";
import { optionSpecs } from "../../../../shared/core/settings/options.js";
import {
  bool,
  envName,
  flagAndEnvName,
  flagName,
  flagSyntax,
  OptionsError,
  parseSettings,
  pickSettings,
  type SettingSpec,
  settingsFromEnv,
  settingsFromFlags,
  settingsSchema,
} from "../../../../shared/core/settings/settings.js";
import { storeRegion, storeSettingSpecs, storeSettings } from "../../../../shared/core/settings/store-settings.js";

const specs = {
  httpPort: { schema: z.coerce.number().int().default(80), help: "HTTP port" },
  storePathStyle: { schema: bool.default(false), help: "path-style URLs", switch: true },
  storeRegion: { schema: z.string().optional(), help: "region", placeholder: "region" },
  notifyToken: { schema: z.string().optional(), help: "the token", envOnly: true },
} as const satisfies Record<string, SettingSpec>;

describe("a setting spec", () => {
  it.each([
    ["httpPort", "--http-port", "SERVICELB_HTTP_PORT", "--http-port <value>", "--http-port / SERVICELB_HTTP_PORT"],
    [
      "storePathStyle",
      "--store-path-style",
      "SERVICELB_STORE_PATH_STYLE",
      "--store-path-style",
      "--store-path-style / SERVICELB_STORE_PATH_STYLE",
    ],
    [
      "storeRegion",
      "--store-region",
      "SERVICELB_STORE_REGION",
      "--store-region <region>",
      "--store-region / SERVICELB_STORE_REGION",
    ],
    ["notifyToken", "--notify-token", "SERVICELB_NOTIFY_TOKEN", undefined, "SERVICELB_NOTIFY_TOKEN"],
  ] as const)("%s yields flag %s, variable %s, commander syntax %s, error name %s", (key, flag, env, syntax, named) => {
    const spec: SettingSpec = specs[key];
    expect(`--${flagName(key)}`).toBe(flag);
    expect(envName(key)).toBe(env);
    expect(flagSyntax(key, spec)).toBe(syntax);
    expect(flagAndEnvName(key, spec)).toBe(named);
  });

  it("yields one strict schema whose keys are the config file's keys", () => {
    const schema = settingsSchema(specs);
    expect(Object.keys(schema.shape)).toEqual(["httpPort", "storePathStyle", "storeRegion", "notifyToken"]);
    expect(schema.parse({ httpPort: "8080", storePathStyle: "true" })).toEqual({
      httpPort: 8080,
      storePathStyle: true,
    });
    expect(schema.safeParse({ httpport: 1 }).success).toBe(false);
  });

  it.each([
    [true, true],
    ["true", true],
    ["false", false],
    ["yes", true],
    ["off", false],
  ])("reads a switch given as %j", (input, value) => {
    expect(bool.parse(input)).toBe(value);
  });

  it("refuses a switch that is neither, saying what it takes", () => {
    expect(() => parseSettings(settingsSchema(specs), { storePathStyle: "sometimes" }, envName)).toThrow(
      "SERVICELB_STORE_PATH_STYLE: true or false",
    );
  });

  it("names each bad setting as its users set it, one line each", () => {
    const parse = () =>
      parseSettings(settingsSchema(specs), { httpPort: "x", storePathStyle: "x" }, (k) => `--${flagName(k)}`);
    expect(parse).toThrow(OptionsError);
    expect(parse).toThrow(/^--http-port: .*\n--store-path-style: true or false$/);
  });

  it("reads only its own variables, and never a secret from a flag", () => {
    const env = { SERVICELB_HTTP_PORT: "81", SERVICELB_NOTIFY_TOKEN: "t", SERVICELB_OTHER: "x", HOME: "/" };
    expect(settingsFromEnv(env, Object.keys(specs))).toEqual({ httpPort: "81", notifyToken: "t" });
    expect(
      settingsFromFlags({ httpPort: "82", notifyToken: "t", format: "json", storeRegion: undefined }, specs),
    ).toEqual({
      httpPort: "82",
    });
    expect(pickSettings({ httpPort: 1, format: "json", storeRegion: undefined }, specs)).toEqual({ httpPort: 1 });
  });
});

describe("the settings of every process", () => {
  it("share the store settings: the agent and the functions read the same names", () => {
    for (const key of Object.keys(storeSettingSpecs)) {
      expect(agentOptionSpecs).toHaveProperty(key, storeSettingSpecs[key as keyof typeof storeSettingSpecs]);
      expect(functionSettingSpecs).toHaveProperty(key, storeSettingSpecs[key as keyof typeof storeSettingSpecs]);
    }
  });

  it("give every setting help, and a flag to all but the secrets", () => {
    const all: Record<string, SettingSpec> = { ...optionSpecs, ...agentOptionSpecs, ...functionSettingSpecs };
    for (const [key, spec] of Object.entries(all)) {
      expect(spec.help, key).not.toBe("");
      expect(flagSyntax(key, spec) === undefined, key).toBe(spec.envOnly === true);
    }
    expect(Object.keys({ ...clusterSettingSpecs, ...notifySettingSpecs })).toEqual(
      expect.arrayContaining(["template", "kubeconfig", "context", "agents", "notifyTokenFile"]),
    );
  });

  it("fall back to AWS_REGION, then AWS_DEFAULT_REGION, for the store region", () => {
    expect(storeRegion("eu-west-1", { AWS_REGION: "ap-south-1" })).toBe("eu-west-1");
    expect(storeRegion(undefined, { AWS_REGION: "ap-south-1", AWS_DEFAULT_REGION: "us-west-2" })).toBe("ap-south-1");
    expect(storeRegion(undefined, { AWS_DEFAULT_REGION: "us-west-2" })).toBe("us-west-2");
    expect(storeRegion(undefined, {})).toBeUndefined();
  });

  it("name no store without a URL, and keep retain only where it is set", () => {
    expect(storeSettings({ storePathStyle: true }, {})).toBeUndefined();
    expect(storeSettings({ store: "s3://b", storePathStyle: true }, { AWS_REGION: "eu-west-1" })).toEqual({
      url: "s3://b",
      endpoint: undefined,
      region: "eu-west-1",
      forcePathStyle: true,
    });
    expect(storeSettings({ store: "s3://b", storePathStyle: false, storeRetain: 3 }, {})?.retain).toBe(3);
  });
});
