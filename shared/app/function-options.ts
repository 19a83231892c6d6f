import { accessSync, constants } from "node:fs";
import { z } from "zod";
import { parseServiceRef } from "../core/k8s-names.js";
import {
  envName,
  optionSpecs,
  OptionsError,
  parseRenderOptions,
  pickRenderOptions,
  type RenderOptions,
} from "../core/options.js";
import { mergeOptionSources } from "../adapters/option-sources.js";
import { storeUrlSchema } from "../core/store-url.js";

/** Where published configs live (`--store` and friends). */
export interface StoreSettings {
  /** s3://bucket[/prefix] */
  url: string;
  endpoint?: string;
  region?: string;
  forcePathStyle: boolean;
  /** How many configs to keep (invariant 6: bounded history). */
  retain: number;
}

/** How the reconcile function finds and pings the agents. */
export interface NotifySettings {
  /** Static agent base URLs (SERVICELB_AGENTS). */
  agents: string[];
  /** The agent Service whose EndpointSlices list the agents. */
  agentService?: { namespace: string; name: string };
  /** Slice port name, or a port number, of the agents' /notify endpoint. */
  agentPort: string | number;
  token?: string;
  /** Read at every notify, so that a rotated Secret takes effect without a restart. */
  tokenFile?: string;
  timeoutMs: number;
}

/** Settings only the deployed functions (and the CLI commands that share them) read. */
export interface FunctionSettings {
  options: RenderOptions;
  template?: string;
  kubeconfig?: string;
  context?: string;
  /** Largest snapshot the HTTP dry run accepts. */
  maxBodyBytes: number;
  /** Absent for the dry run, which publishes nothing; the reconcile function refuses to start without it. */
  store?: StoreSettings;
  /** Overall deadline of one reconcile pass: every API and store call in it. */
  passTimeoutMs: number;
  notify: NotifySettings;
}

const bool = z.union([z.boolean(), z.stringbool()], { error: "true or false" });
const commaList = z
  .union([z.string(), z.array(z.string())])
  .transform((v) => (Array.isArray(v) ? v : v.split(",")).map((s) => s.trim()).filter((s) => s !== ""));
const wholeNumber = (message: string, min: number, max: number) =>
  z.coerce.number({ error: message }).int(message).min(min, message).max(max, message);
const PORT_NAME = /^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$/;

/** The settings beyond the render options, with the same SERVICELB_<UPPER_SNAKE> / --kebab-case naming. */
const extraSchemas = {
  template: z.string().optional(),
  kubeconfig: z.string().optional(),
  context: z.string().optional(),
  maxBodyBytes: wholeNumber("a whole number of bytes ≥ 1024", 1024, Number.MAX_SAFE_INTEGER).default(32 * 1024 * 1024),
  store: storeUrlSchema.optional(),
  storeEndpoint: z.url({ protocol: /^https?$/, error: "an http(s) URL" }).optional(),
  storeRegion: z
    .string()
    .regex(/^[a-z0-9-]{1,32}$/, "a region name such as eu-west-1")
    .optional(),
  storePathStyle: bool.default(false),
  storeRetain: wholeNumber("a whole number of configs from 1 to 10000", 1, 10_000).default(50),
  agents: commaList.pipe(z.array(z.url({ protocol: /^https?$/, error: "comma list of http(s) URLs" }))).default([]),
  agentService: z
    .string()
    .refine(
      (ref) => ref.includes("/") && parseServiceRef(ref, "default") !== null,
      "namespace/name of the agent Service",
    )
    .optional(),
  agentPort: z
    .union([z.number(), z.string()])
    .transform((v, ctx) => {
      if (typeof v === "string" && /^[0-9]+$/.test(v)) v = Number(v);
      if (typeof v === "number" ? Number.isInteger(v) && v >= 1 && v <= 65535 : PORT_NAME.test(v)) return v;
      ctx.addIssue({ code: "custom", message: "a port number or a port name" });
      return z.NEVER;
    })
    .default("agent"),
  notifyToken: z.string().min(1).optional(),
  notifyTokenFile: z
    .string()
    .refine((path) => {
      try {
        accessSync(path, constants.R_OK);
        return true;
      } catch {
        return false;
      }
    }, "a readable file")
    .optional(),
  notifyTimeoutMs: wholeNumber("a whole number of milliseconds from 50 to 60000", 50, 60_000).default(2000),
  passTimeoutMs: wholeNumber("a whole number of milliseconds from 100 to 3600000", 100, 3_600_000).default(60_000),
};

const extraSchema = z.object(extraSchemas).strict();
export const FUNCTION_SETTING_KEYS: readonly string[] = [...Object.keys(optionSpecs), ...Object.keys(extraSchemas)];

/**
 * Reads the settings from the SERVICELB_CONFIG file (or `flags.config`), SERVICELB_* variables and,
 * for the CLI, flags. The functions call it at start-up, so a bad setting stops the instance with a
 * message naming it instead of failing every request.
 */
export function loadFunctionSettings(
  env: Readonly<Record<string, string | undefined>> = process.env,
  flags: Readonly<Record<string, unknown>> = {},
): FunctionSettings {
  const merged = mergeOptionSources({
    keys: FUNCTION_SETTING_KEYS,
    configFile: (flags.config as string | undefined) ?? env.SERVICELB_CONFIG,
    env,
    flags,
  });
  const extraInput = Object.fromEntries(
    Object.keys(extraSchemas)
      .filter((k) => merged[k] !== undefined)
      .map((k) => [k, merged[k]]),
  );
  const parsed = extraSchema.safeParse(extraInput);
  if (!parsed.success) {
    throw new OptionsError(
      parsed.error.issues.map((i) => `${envName(String(i.path[0] ?? ""))}: ${i.message}`).join("\n"),
    );
  }
  const x = parsed.data;
  const agentRef = x.agentService ? parseServiceRef(x.agentService, "default")! : undefined;
  return {
    options: parseRenderOptions(pickRenderOptions(merged)),
    template: x.template,
    kubeconfig: x.kubeconfig,
    context: x.context,
    maxBodyBytes: x.maxBodyBytes,
    passTimeoutMs: x.passTimeoutMs,
    store: x.store
      ? {
          url: x.store,
          endpoint: x.storeEndpoint,
          // The store falls back to us-east-1, not to the AWS SDK's region chain: honour the usual variables here.
          region: x.storeRegion ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION,
          forcePathStyle: x.storePathStyle,
          retain: x.storeRetain,
        }
      : undefined,
    notify: {
      agents: x.agents,
      agentService: agentRef,
      agentPort: x.agentPort,
      token: x.notifyToken,
      tokenFile: x.notifyTokenFile,
      timeoutMs: x.notifyTimeoutMs,
    },
  };
}

/** The store settings, or an error that names the variable to set. */
export function requireStore(settings: FunctionSettings): StoreSettings {
  if (!settings.store)
    throw new OptionsError(
      `--store / ${envName("store")} is required: s3://bucket[/prefix] where configs are published`,
    );
  return settings.store;
}
