import { accessSync, constants } from "node:fs";
import { z } from "zod";
import { parseServiceRef } from "../core/kubernetes/k8s-names.js";
import { optionSpecs, parseRenderOptions, pickRenderOptions, type RenderOptions } from "../core/settings/options.js";
import {
  bool,
  envName,
  flagAndEnvName,
  OptionsError,
  parseSettings,
  pickSettings,
  type SettingSpec,
  type SettingSpecs,
  settingsSchema,
  wholeNumber,
} from "../core/settings/settings.js";
import {
  type StoreSettings,
  storeRetainSpec,
  storeSettingSpecs,
  storeSettings,
} from "../core/settings/store-settings.js";
import type { RolloutSettings } from "../core/rollout/rollout.js";
import { DEFAULT_THRESHOLDS } from "../core/rollout/gate.js";
import { waveSpecsSchema } from "../core/rollout/waves.js";
import { mergeSettingSources } from "../adapters/setting-sources.js";
import type { DigestSetting } from "./agent-reports.js";

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
  /** Pings in flight at once. */
  concurrency: number;
  /** The whole round of pings of one publish. */
  deadlineMs: number;
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
  /** How long the full list behind a head start that served its event waits for more events (0: not at all). */
  confirmDelayMs: number;
  /** The digest configs are published by (app/agent-reports.ts). */
  digest: DigestSetting;
  notify: NotifySettings;
  /** Canary rollouts (docs/design.md#canary-rollouts); null: off, every node follows the newest config. */
  canary?: RolloutSettings | null;
}

const commaList = z
  .union([z.string(), z.array(z.string())])
  .transform((v) => (Array.isArray(v) ? v : v.split(",")).map((s) => s.trim()).filter((s) => s !== ""));
const PORT_NAME = /^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$/;

/** Which cluster a live render lists, and with which template: the dry run's and reconcile's. */
export const clusterSettingSpecs = {
  template: {
    schema: z.string().optional(),
    help: "main template; fragments beside it override the built-in ones",
    placeholder: "file",
  },
  kubeconfig: {
    schema: z.string().optional(),
    help: "kubeconfig for the live cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)",
    placeholder: "file",
  },
  context: { schema: z.string().optional(), help: "kubeconfig context", placeholder: "name" },
} as const satisfies Record<string, SettingSpec>;

/** How a reconcile pass pings the agents after publishing. */
export const notifySettingSpecs = {
  agents: {
    schema: commaList.pipe(z.array(z.url({ protocol: /^https?$/, error: "comma list of http(s) URLs" }))).default([]),
    help: "comma list of agent base URLs to ping",
    placeholder: "urls",
  },
  agentService: {
    schema: z
      .string()
      .refine(
        (ref) => ref.includes("/") && parseServiceRef(ref, "default") !== null,
        "namespace/name of the agent Service",
      )
      .optional(),
    help: "the agent Service; its EndpointSlices list the agents",
    placeholder: "namespace/name",
  },
  agentPort: {
    schema: z
      .union([z.number(), z.string()])
      .transform((v, ctx) => {
        if (typeof v === "string" && /^[0-9]+$/.test(v)) v = Number(v);
        if (typeof v === "number" ? Number.isInteger(v) && v >= 1 && v <= 65535 : PORT_NAME.test(v)) return v;
        ctx.addIssue({ code: "custom", message: "a port number or a port name" });
        return z.NEVER;
      })
      .default("agent"),
    help: "the agents' notify port: a slice port name or a number (default: agent)",
    placeholder: "name|number",
  },
  notifyToken: { schema: z.string().min(1).optional(), help: "bearer token for the agents", envOnly: true },
  notifyTokenFile: {
    schema: z
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
    help: "bearer token for the agents (or SERVICELB_NOTIFY_TOKEN)",
    placeholder: "file",
  },
  notifyTimeoutMs: {
    schema: wholeNumber("a whole number of milliseconds from 50 to 60000", 50, 60_000).default(2000),
    help: "per-agent ping timeout",
    placeholder: "ms",
  },
  notifyConcurrency: {
    schema: wholeNumber("a whole number from 1 to 1000", 1, 1000).default(64),
    help: "agent pings in flight at once",
    placeholder: "n",
  },
  notifyDeadlineMs: {
    schema: wholeNumber("a whole number of milliseconds from 100 to 60000", 100, 60_000).default(5000),
    help: "the whole round of pings of one publish; agents not pinged by then converge by their poll",
    placeholder: "ms",
  },
} as const satisfies Record<string, SettingSpec>;

/** Set by variable or config file only: the CLI's commands have no use for them. */
const functionOnlySpecs = {
  maxBodyBytes: {
    schema: wholeNumber("a whole number of bytes ≥ 1024", 1024, Number.MAX_SAFE_INTEGER).default(32 * 1024 * 1024),
    help: "largest snapshot the HTTP dry run accepts",
  },
  passTimeoutMs: {
    schema: wholeNumber("a whole number of milliseconds from 100 to 3600000", 100, 3_600_000).default(60_000),
    help: "overall deadline of one reconcile pass",
  },
  confirmDelayMs: {
    schema: wholeNumber("a whole number of milliseconds from 0 to 10000", 0, 10_000).default(200),
    help: "how long the full list behind a head start that served its event waits for more events (at most 5 times this after the first)",
  },
  digest: {
    schema: z.enum(["auto", "sha256", "tree1"]).default("auto"),
    help: "the digest configs are published by: auto (tree1 once every agent's report says it verifies tree1), sha256 or tree1",
  },
} as const satisfies Record<string, SettingSpec>;

/** Canary rollouts: the function runs the gates (app/rollout-gates.ts). */
export const canarySettingSpecs = {
  canary: {
    schema: bool.default(false),
    help: "roll changes that need a reload out in waves, each judged by its gate, and roll a failed wave back (default off: every node takes the newest config at once)",
  },
  canaryWaves: {
    schema: waveSpecsSchema.prefault("1,10%,50%,100%"),
    help: "the waves: nodes or shares of the fleet, growing (default 1,10%,50%,100%)",
  },
  canaryBakeMs: {
    schema: wholeNumber("a whole number of milliseconds from 0 to 86400000", 0, 86_400_000).default(60_000),
    help: "how long each wave runs before its gate may pass it (default 60000)",
  },
  canaryMinRequests: {
    schema: wholeNumber("a whole number from 1 to 1000000000", 1, 1_000_000_000).default(
      DEFAULT_THRESHOLDS.minRequests,
    ),
    help: "requests a backend, and a wave, needs before its figures judge anything (default 100)",
  },
  canaryDeadlineMs: {
    schema: wholeNumber("a whole number of milliseconds from 0 to 604800000", 0, 604_800_000).default(600_000),
    help: "how long a wave waits for that many requests before the fallback (default 600000)",
  },
  canaryFallback: {
    schema: z.enum(["promote", "hold"]).default("promote"),
    help: "what a wave with too little traffic does at its deadline: promote (the next wave) or hold (until servicelb rollout promote or abort) (default promote)",
  },
  canaryConvergeMs: {
    schema: wholeNumber("a whole number of milliseconds from 1000 to 3600000", 1000, 3_600_000).default(120_000),
    help: "how long an admitted node may take to run the candidate before its wave fails (default 120000)",
  },
} as const satisfies Record<string, SettingSpec>;

/** The settings beyond the render options. */
const extraSpecs = {
  ...clusterSettingSpecs,
  ...functionOnlySpecs,
  ...storeSettingSpecs,
  storeRetain: storeRetainSpec,
  ...notifySettingSpecs,
  ...canarySettingSpecs,
} as const satisfies Record<string, SettingSpec>;

const extraSchema = settingsSchema(extraSpecs);
/** Every setting a function reads: the keys of its config file, each with its variable. */
export const functionSettingSpecs: SettingSpecs = { ...optionSpecs, ...extraSpecs };
export const FUNCTION_SETTING_KEYS: readonly string[] = Object.keys(functionSettingSpecs);

/**
 * Reads the settings from the SERVICELB_CONFIG file (or `flags.config`), SERVICELB_* variables and,
 * for the CLI, flags. The functions call it at start-up, so a bad setting stops the instance with a
 * message naming it instead of failing every request.
 */
export function loadFunctionSettings(
  env: Readonly<Record<string, string | undefined>> = process.env,
  flags: Readonly<Record<string, unknown>> = {},
): FunctionSettings {
  const merged = mergeSettingSources({ specs: functionSettingSpecs, env, flags });
  // The functions are set by variables: the errors name those.
  const extra = parseSettings(extraSchema, pickSettings(merged, extraSpecs), envName);
  const agentRef = extra.agentService ? parseServiceRef(extra.agentService, "default")! : undefined;
  return {
    options: parseRenderOptions(pickRenderOptions(merged)),
    template: extra.template,
    kubeconfig: extra.kubeconfig,
    context: extra.context,
    maxBodyBytes: extra.maxBodyBytes,
    passTimeoutMs: extra.passTimeoutMs,
    confirmDelayMs: extra.confirmDelayMs,
    digest: extra.digest,
    store: storeSettings(extra, env),
    notify: {
      agents: extra.agents,
      agentService: agentRef,
      agentPort: extra.agentPort,
      token: extra.notifyToken,
      tokenFile: extra.notifyTokenFile,
      timeoutMs: extra.notifyTimeoutMs,
      concurrency: extra.notifyConcurrency,
      deadlineMs: extra.notifyDeadlineMs,
    },
    canary: extra.canary
      ? {
          waves: extra.canaryWaves,
          bakeMs: extra.canaryBakeMs,
          deadlineMs: extra.canaryDeadlineMs,
          fallback: extra.canaryFallback,
          convergeMs: extra.canaryConvergeMs,
          thresholds: { ...DEFAULT_THRESHOLDS, minRequests: extra.canaryMinRequests },
        }
      : null,
  };
}

/** The store settings, or an error that names the variable to set. */
export function requireStore(settings: FunctionSettings): StoreSettings {
  if (!settings.store)
    throw new OptionsError(
      `${flagAndEnvName("store", storeSettingSpecs.store)} is required: s3://bucket[/prefix] where configs are published`,
    );
  return settings.store;
}
