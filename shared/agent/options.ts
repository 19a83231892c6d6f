/*
 * The agent's settings in one table of setting specs (core/settings/settings.ts): `--kebab-case` flags over
 * SERVICELB_<UPPER_SNAKE> variables. The store settings are the reconcile function's own
 * (core/settings/store-settings.ts), so one ConfigMap can feed both.
 */

import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { z } from "zod";
import { DNS1123_SUBDOMAIN } from "../core/kubernetes/k8s-names.js";
import {
  bool,
  envName,
  flagAndEnvName,
  OptionsError,
  parseSettings,
  type SettingSpec,
  type SettingValues,
  settingsFromEnv,
  settingsFromFlags,
  settingsSchema,
} from "../core/settings/settings.js";
import { type StoreSettings, storeRegion, storeSettingSpecs } from "../core/settings/store-settings.js";
import { DEFAULT_MAX_OBJECT_BYTES } from "../adapters/store-limits.js";
import {
  CONFIG_DIR_VARIABLE,
  GATEWAY_CERT_DIR_VARIABLE,
  type HaproxyEnv,
  NODE_ADDRESS_VARIABLE,
} from "../core/haproxy-config/environment.js";

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const durationMs = (min: number) =>
  z
    .string()
    .regex(/^[0-9]{1,9}(ms|s|m|h)$/, "a duration such as 500ms, 30s, 5m or 1h")
    .transform((s) => {
      const [, n, unit] = /^([0-9]+)(ms|s|m|h)$/.exec(s)!;
      return Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS];
    })
    .refine((ms) => ms >= min, `at least ${min} ms`);
const UNIT_BYTES = { "": 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 } as const;
const sizeBytes = (min: number) =>
  z
    .string()
    .regex(/^[0-9]{1,12}(Ki|Mi|Gi)?$/, "a size in bytes, or with Ki, Mi or Gi, such as 64Mi")
    .transform((s) => {
      const [, n, unit = ""] = /^([0-9]+)(Ki|Mi|Gi)?$/.exec(s)!;
      return Number(n) * UNIT_BYTES[unit as keyof typeof UNIT_BYTES];
    })
    .refine((bytes) => bytes >= min, `at least ${min} bytes`);
const count = (min: number) =>
  z
    .union([
      z.number(),
      z
        .string()
        .regex(/^[0-9]{1,6}$/, "a whole number")
        .transform(Number),
    ])
    .pipe(z.number().int().min(min));
const filePath = z.string().min(1, "a path").max(4096);
// Unix socket paths are limited to 108 bytes (sun_path) on Linux.
const socketPath = z.string().min(1, "a path").max(107, "at most 107 bytes (a unix socket path)");

const listen = z.string().transform((text, ctx) => {
  const m = /^(\[[0-9a-fA-F:.]+\]|[0-9.]+|[a-zA-Z0-9.-]+):([0-9]{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : -1;
  if (!m || port > 65535) {
    ctx.addIssue({ code: "custom", message: "host:port, e.g. 0.0.0.0:8081 or [::]:8081 (port 0: any free port)" });
    return z.NEVER;
  }
  return { host: m[1]!.replace(/^\[(.*)\]$/, "$1"), port };
});

const nodeAddress = z
  .string()
  .regex(/^([0-9.]{7,15}|\[[0-9a-fA-F:.]{2,45}\])$/, "an IPv4 address or a bracketed IPv6 address");

const nodeName = z.string().max(253).regex(DNS1123_SUBDOMAIN, "a DNS-1123 subdomain (lowercase a-z, 0-9, '-', '.')");

export const agentOptionSpecs = {
  ...storeSettingSpecs,
  nodeName: { schema: nodeName.optional(), help: "this node's name in status/<node>.json (default: the host name)" },
  nodeAddress: {
    schema: nodeAddress.optional(),
    help: `this node's address, given to HAProxy as SERVICELB_NODE_ADDRESS: a config rendered with --bind-address '\${SERVICELB_NODE_ADDRESS}' binds it (several nodes on one machine, each on its own loopback address)`,
  },
  listen: {
    schema: listen.default({ host: "0.0.0.0", port: 8081 }),
    help: "address of /notify, /healthz, /metrics, /metrics/haproxy and /status (default 0.0.0.0:8081)",
  },
  configPath: {
    schema: filePath.default("/etc/haproxy/haproxy.cfg"),
    help: "the haproxy.cfg HAProxy runs, replaced atomically (default /etc/haproxy/haproxy.cfg)",
  },
  stateDir: {
    schema: filePath.optional(),
    help: "where the agent remembers the applied config (default: the config's directory)",
  },
  masterSocket: {
    schema: socketPath.default("/var/run/haproxy/master.sock"),
    help: "HAProxy master CLI socket, haproxy -W -S (default /var/run/haproxy/master.sock)",
  },
  haproxyBin: { schema: z.string().min(1).default("haproxy"), help: "HAProxy binary (default: haproxy on the PATH)" },
  pollInterval: {
    schema: durationMs(100).default(30_000),
    help: "how often to look for a newer config without a ping (default 30s, jittered)",
  },
  minReloadInterval: {
    schema: durationMs(0).default(1000),
    help: "least time between two reloads (default 1s); the newest config waits and wins",
  },
  storeTimeout: {
    schema: durationMs(100).default(20_000),
    help: "deadline of each store request, body included (default 20s); the client's own timeouts only catch a store that goes silent, not one that answers slowly",
  },
  maxConfigSize: {
    schema: sizeBytes(1024).default(DEFAULT_MAX_OBJECT_BYTES),
    help: "largest config object the agent reads (default 64Mi); a larger one is refused from its Content-Length, unread",
  },
  stalePullPeriods: {
    schema: count(1).default(3),
    help: "after this many poll intervals without a completed pull, /status, /healthz and metrics say the pulls are stale (default 3)",
  },
  statusInterval: {
    schema: durationMs(100).default(60_000),
    help: "how often to write status/<node>.json (default 60s, and a second after an apply or a failure)",
  },
  certificateInterval: {
    schema: durationMs(100).default(2000),
    help: "how often to look for renewed certificate files of the certificates HAProxy loaded, swapped in without a reload (default 2s)",
  },
  checkTimeout: {
    schema: durationMs(1000).default(30_000),
    help: "longest haproxy -c may take before the config counts as not checked (default 30s, and 2s per MiB of config when that is longer: it parses the whole config)",
  },
  startTimeout: {
    schema: durationMs(1000).default(15_000),
    help: "longest HAProxy may take to start or reload and serve (default 15s, and 2s per MiB of config when that is longer: it parses the whole config, as haproxy -c does)",
  },
  stopGrace: {
    schema: durationMs(0).default(330_000),
    help: "on SIGTERM, how long HAProxy's open connections may take to finish before it is killed (default 330s: past the default hard-stop-after of 5m)",
  },
  notifyTokenFile: {
    schema: filePath.optional(),
    help: "file holding the bearer token /notify requires (read at every request)",
  },
  notifyToken: { schema: z.string().min(1).optional(), help: "the bearer token, when no file is given", envOnly: true },
  gatewayCertDir: {
    schema: filePath.optional(),
    help: "directory of the certificate files of Gateway HTTPS listeners, <namespace>/<name>.pem (certificate and key) for a certificateRef to Secret <namespace>/<name>; given to HAProxy as SERVICELB_GATEWAY_CERT_DIR, and the files that parse are reported to the store by name (default: none, no HTTPS listener is bound on this node)",
  },
  canary: {
    schema: bool.default(false),
    help: "take part in canary rollouts: run the config rollout.json names for this node, and report HAProxy's per-backend counters for the gates (default off)",
    switch: true,
  },
} as const satisfies Record<string, SettingSpec>;

type Parsed = SettingValues<typeof agentOptionSpecs>;

export interface AgentOptions extends Omit<Parsed, "store" | "nodeName" | "stateDir" | "storeRegion"> {
  store: string;
  nodeName: string;
  stateDir: string;
  storeRegion?: string;
}

const schema = settingsSchema(agentOptionSpecs);

// The DaemonSet sets variables and a shell sets flags: errors name a setting both ways.
function describeKey(key: string): string {
  return flagAndEnvName(key, (agentOptionSpecs as Record<string, SettingSpec>)[key]);
}

/**
 * Validates the agent's settings from flags (commander's camelCase keys) over SERVICELB_*
 * variables. Errors name each setting both ways, since the DaemonSet sets variables.
 */
export function parseAgentOptions(
  env: Readonly<Record<string, string | undefined>>,
  flags: Readonly<Record<string, unknown>> = {},
): AgentOptions {
  const input = {
    ...settingsFromEnv(env, Object.keys(agentOptionSpecs)),
    ...settingsFromFlags(flags, agentOptionSpecs),
  };
  const parsed = parseSettings(schema, input, describeKey);
  if (!parsed.store)
    throw new OptionsError(`${describeKey("store")} is required: s3://bucket[/prefix] where configs are published`);
  if (!parsed.notifyTokenFile && !parsed.notifyToken) {
    // An agent that reloads HAProxy on anyone's say-so is an open door; refuse to run without a token.
    throw new OptionsError(
      `${describeKey("notifyTokenFile")} or ${envName("notifyToken")} is required: the bearer token of POST /notify`,
    );
  }
  const node = parsed.nodeName ?? hostname().toLowerCase();
  if (!nodeName.safeParse(node).success)
    throw new OptionsError(
      `${describeKey("nodeName")}: the host name ${JSON.stringify(node)} is not a DNS-1123 subdomain; set it`,
    );
  return {
    ...parsed,
    store: parsed.store,
    nodeName: node,
    stateDir: parsed.stateDir ?? dirname(parsed.configPath),
    storeRegion: storeRegion(parsed.storeRegion, env),
  };
}

/** The store the agent pulls from. */
export function agentStore(options: AgentOptions): StoreSettings {
  return {
    url: options.store,
    endpoint: options.storeEndpoint,
    region: options.storeRegion,
    forcePathStyle: options.storePathStyle,
  };
}

/** The agent's own record of what it applied, beside the config by default. */
export function stateFilePath(options: Pick<AgentOptions, "stateDir">): string {
  return join(options.stateDir, "servicelb-agent.json");
}

/**
 * The environment the agent gives HAProxy — its master (which keeps it across reloads) and its
 * `haproxy -c` — and reads the config's paths and addresses with: the agent's own, with this
 * node's values a config may name. One published config then binds and keeps its sockets where
 * each node says.
 */
export function haproxyEnvironment(
  options: Pick<AgentOptions, "configPath" | "nodeAddress" | "gatewayCertDir">,
  env: HaproxyEnv,
): HaproxyEnv {
  return {
    ...env,
    [CONFIG_DIR_VARIABLE]: dirname(options.configPath),
    ...(options.nodeAddress ? { [NODE_ADDRESS_VARIABLE]: options.nodeAddress } : {}),
    ...(options.gatewayCertDir ? { [GATEWAY_CERT_DIR_VARIABLE]: options.gatewayCertDir } : {}),
  };
}
