/*
 * Every setting that shapes the rendered config, in one table of setting specs (settings.ts): the
 * CLI builds its render flags from it and the functions read the same settings from SERVICELB_*
 * variables and the config file.
 */

import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { DENY_STATUSES, REDIRECT_CODES } from "../render/http-statuses.js";
import { parseTimeout, TIMEOUT_GRAMMAR } from "../render/haproxy-time.js";
import { parseHost, type HostMatch } from "../model/host-match.js";
import { parseLabelSelector, type LabelSelector } from "../kubernetes/label-selector.js";
import { MAX_INLINE_SOURCE_RANGES, MAX_SOURCE_RANGES, parseSourceRanges } from "../model/source-ranges.js";
import { DNS1123_LABEL, parseServiceRef } from "../kubernetes/k8s-names.js";
import {
  bool,
  flagName,
  parseSettings,
  pickSettings,
  type SettingInputs,
  type SettingSpec,
  type SettingValues,
  settingsSchema,
  wholeNumber,
} from "./settings.js";
import { errorMessage } from "../error-message.js";

export const ALGORITHMS = ["roundrobin", "leastconn", "first", "source"] as const;

const port = wholeNumber("a port number from 1 to 65535", 1, 65535);
const duration = z.string().regex(/^[0-9]{1,9}(us|ms|s|m|h|d)$/, "a duration such as 500ms, 2s, 5m or 1h");
// Paths end up unquoted in haproxy.cfg: refuse anything that could split or comment a line.
const path = z.string().regex(/^[A-Za-z0-9._/@:+-]{1,1024}$/, "a file path of letters, digits and . _ / @ : + - only");
/** `crt-list:<file>`: HAProxy's crt-list (a certificate per line, with SNI filters); else a PEM file or a directory. */
export const CRT_LIST_PREFIX = "crt-list:";
const certSource = path.refine(
  (v) => !v.startsWith(CRT_LIST_PREFIX) || /^[A-Za-z0-9._/@+-]/.test(v.slice(CRT_LIST_PREFIX.length)),
  `a PEM file, a directory, or ${CRT_LIST_PREFIX}<file>`,
);
// ${NAME}: each node's own value, which HAProxy reads from its environment (haproxy-config/environment.ts).
const bindAddress = z
  .string()
  .regex(
    /^(\*|[0-9.]{7,15}|\[[0-9a-fA-F:.]{2,45}\]|\$\{[A-Za-z_][A-Za-z0-9_]*\})$/,
    `* or an IPv4 address or a bracketed IPv6 address, or \${NAME}: a variable HAProxy reads on each node`,
  );
/** A path of a node's own file: as `path`, with ${NAME} variables HAProxy reads on each node. */
const nodePath = z
  .string()
  .regex(
    /^([A-Za-z0-9._/@:+-]|\$\{[A-Za-z_][A-Za-z0-9_]*\}){1,1024}$/,
    `a file path of letters, digits and . _ / @ : + - only, and \${NAME} variables HAProxy reads on each node`,
  );

const timeout = z.string().transform((text, ctx) => {
  const parsed = parseTimeout(text);
  if (parsed !== null) return parsed;
  ctx.addIssue({ code: "custom", message: TIMEOUT_GRAMMAR });
  return z.NEVER;
});

/** A source list of at most `max` entries; any bad entry refuses it whole. */
const sourceRanges = (max: number) =>
  z.string().transform((text, ctx) => {
    const parsed = parseSourceRanges(text, max);
    if (Array.isArray(parsed)) return parsed;
    ctx.addIssue({ code: "custom", message: parsed.error });
    return z.NEVER;
  });

/** An HTTP status from a fixed list (those HAProxy has a page or a redirect for). */
function statusOf<const T extends number>(codes: readonly T[]) {
  return z.coerce
    .number({ error: `one of ${codes.join(", ")}` })
    .refine((v) => (codes as readonly number[]).includes(v), `one of ${codes.join(", ")}`)
    .transform((v) => v as T);
}

const tcpServices = z.string().transform((text, ctx) => {
  const out: Array<{ ref: string; port: number }> = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const m = /^([^:]+):([0-9]{1,5})$/.exec(entry);
    const p = m ? Number(m[2]) : 0;
    if (!m?.[1] || p < 1 || p > 65535 || !parseServiceRef(m[1], "default")) {
      ctx.addIssue({ code: "custom", message: `"${entry}" is not name:port or namespace/name:port` });
      return z.NEVER;
    }
    out.push({ ref: m[1], port: p });
  }
  return out;
});

const selector = z.string().transform((text, ctx): LabelSelector => {
  try {
    return parseLabelSelector(text);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: errorMessage(err) });
    return z.NEVER;
  }
});

const hostPattern = z.string().transform((text, ctx): HostMatch => {
  const host = parseHost(text);
  if (typeof host !== "string") return host;
  ctx.addIssue({ code: "custom", message: host });
  return z.NEVER;
});
// A map in the config file; a flag or variable holds the same map as YAML or JSON text.
const hostClaims = z.preprocess(
  (value) => {
    if (typeof value !== "string") return value;
    try {
      return parseYaml(value) as unknown;
    } catch {
      return value;
    }
  },
  z.record(z.string().regex(DNS1123_LABEL, "a namespace name"), z.array(hostPattern), {
    error: 'a map of namespace to host patterns, such as {shop: [shop.example.com, "*.shop.example.com"]}',
  }),
);

const hostList = z.string().transform((text, ctx): HostMatch[] => {
  const out: HostMatch[] = [];
  for (const raw of text.split(",")) {
    const entry = raw.trim();
    if (entry === "") continue;
    const host = parseHost(entry);
    if (typeof host === "string") {
      ctx.addIssue({ code: "custom", message: host });
      return z.NEVER;
    }
    out.push(host);
  }
  return out;
});

export const optionSpecs = {
  namespace: {
    schema: z.string().regex(DNS1123_LABEL, "a namespace name").optional(),
    help: "only this namespace (default: all namespaces)",
  },
  selector: { schema: selector.optional(), help: "only Services whose labels match (k=v,k!=v,k,!k)" },
  targetService: {
    schema: z
      .string()
      .refine((s) => parseServiceRef(s, "default") !== null, "name or namespace/name")
      .optional(),
    help: "only this Service (name in any namespace, or namespace/name)",
  },
  tcpServices: {
    schema: tcpServices.default([]),
    help: "comma list of name:port or namespace/name:port served as TCP on that port",
  },
  hostClaims: {
    schema: hostClaims.optional(),
    help: "namespace → hosts (or *.domain) its Services may claim with lb.host; namespaces not listed claim none (default: any host)",
  },
  ownHosts: {
    schema: hostList.optional(),
    help: "comma list of the load balancer's own host names (or *.domain), such as the nodes' DNS names: requests for them are routed by path, and no lb.host may claim or cover them (IP addresses and localhost always are)",
  },
  forwardServices: {
    schema: bool.default(false),
    help: "balance to the Service ClusterIP:port instead of pod endpoints",
    switch: true,
  },
  exposeSystem: {
    schema: bool.default(false),
    help: "also expose kube-system Services and default/kubernetes",
    switch: true,
  },
  bindAddress: {
    schema: bindAddress.default("*"),
    help: `address every frontend binds to; \${NAME}: each node's own, from HAProxy's environment (the agent sets SERVICELB_NODE_ADDRESS from --node-address)`,
  },
  httpPort: { schema: port.default(80), help: "HTTP frontend port" },
  httpsPort: { schema: port.default(443), help: "HTTPS frontend port (with --ssl-cert)" },
  statsPort: { schema: port.default(1936), help: "HAProxy stats page port" },
  statsBind: { schema: bindAddress.default("127.0.0.1"), help: "address the stats page binds to" },
  statsUser: {
    schema: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, "letters, digits, . _ -")
      .optional(),
    help: "require this user on the stats page; its password is read by HAProxy from SERVICELB_STATS_PASSWORD on the node",
  },
  acceptProxy: {
    // On the bind's one `acl` line, not in a pattern file.
    schema: sourceRanges(MAX_INLINE_SOURCE_RANGES).optional(),
    help: "addresses or CIDRs of load balancers in front that send the PROXY protocol (v1 or v2): their clients' addresses are then the ones allow lists, stickiness and logs see",
  },
  sslCert: {
    schema: certSource.optional(),
    help: "PEM (cert+key) path on the HAProxy node, a directory of them, or crt-list:<file> (an HAProxy crt-list); enables the HTTPS frontend",
  },
  sslCaCert: { schema: path.optional(), help: "CA bundle path: clients must present a certificate it signed" },
  hstsMaxAge: {
    schema: wholeNumber("a whole number of seconds from 0 to 63072000", 0, 63_072_000).default(0),
    help: "HSTS max-age in seconds on HTTPS responses (0: off)",
  },
  sslRedirectCode: {
    schema: statusOf(REDIRECT_CODES).default(301),
    help: `status of the HTTP → HTTPS redirect of lb.sslTerm Services (${REDIRECT_CODES.join(", ")}; lb.ssl-redirect-code per Service)`,
  },
  allowSourceRange: {
    // Every backend's list, in its pattern file, as lb.allow-source-range's is: the same cap.
    schema: sourceRanges(MAX_SOURCE_RANGES).optional(),
    help: "comma list of addresses or CIDRs: only clients in it reach any Service (lb.allow-source-range per Service replaces it)",
  },
  denySourceRange: {
    schema: sourceRanges(MAX_SOURCE_RANGES).optional(),
    help: "comma list of addresses or CIDRs refused by every Service (lb.deny-source-range per Service replaces it)",
  },
  rateLimitRps: {
    schema: wholeNumber("a whole number from 1 to 1000000", 1, 1_000_000).optional(),
    help: "HTTP Services: requests per second per client address (lb.rate-limit-rps per Service replaces it)",
  },
  rateLimitStatus: {
    schema: statusOf(DENY_STATUSES).default(429),
    help: `status above the rate (${DENY_STATUSES.join(", ")}; lb.rate-limit-status per Service)`,
  },
  balanceAlgorithm: {
    schema: z.enum(ALGORITHMS).default("roundrobin"),
    help: `default balance algorithm (${ALGORITHMS.join(", ")})`,
  },
  defaultReturnCode: {
    schema: wholeNumber("an HTTP status from 200 to 599", 200, 599).default(404),
    help: "status for requests no Service matches",
  },
  errorPage: {
    schema: path.optional(),
    help: "file whose body is served with --default-return-code (embedded in the config)",
  },
  syslog: { schema: bool.default(false), help: "HAProxy logs to stdout (the agent forwards them)", switch: true },
  activeChecks: {
    schema: bool.default(false),
    help: "health-check the pods of every Service (lb.check per Service); off: Kubernetes readiness decides, and a failed connect is retried on another pod",
    switch: true,
  },
  checkInterval: { schema: duration.default("2s"), help: "health-check interval" },
  timeoutServer: {
    schema: timeout.default("50s"),
    help: "HTTP Services: longest wait for the pod's response (lb.timeout-server per Service)",
  },
  timeoutConnect: {
    schema: timeout.default("5s"),
    help: "longest wait for a connection to a pod (lb.timeout-connect per Service)",
  },
  timeoutClient: {
    schema: timeout.default("50s"),
    help: "HTTP frontends: longest client inactivity (TCP Services: lb.timeout-client)",
  },
  timeoutTunnel: {
    schema: timeout.default("1h"),
    help: "HTTP Services: inactivity of a WebSocket or other tunnel (lb.timeout-tunnel per Service)",
  },
  timeoutQueue: {
    schema: timeout.optional(),
    help: "longest wait in a queue for a server slot under lb.maxconn (default: the connect timeout)",
  },
  hardStopAfter: { schema: duration.default("5m"), help: "longest an old HAProxy worker lives after a reload" },
  minServerSlots: {
    schema: wholeNumber("a whole number from 1 to 1024", 1, 1024).default(4),
    help: "server slots per backend at least (more: one more than its endpoints) so endpoint changes apply without a reload",
  },
  spareBackends: {
    schema: wholeNumber("a whole number from 0 to 10000", 0, 10_000).default(16),
    help: "empty backends kept ready so that a Service added (or removed), or one Gateway routes start to reach, needs no reload; 0: none",
  },
  statsSocket: { schema: nodePath.default("/var/run/haproxy/admin.sock"), help: "HAProxy runtime API socket path" },
  serverStateFile: {
    schema: nodePath.default("/var/lib/haproxy/server-state"),
    help: "file HAProxy loads server state from after a reload",
  },
} as const satisfies Record<string, SettingSpec>;

type Specs = typeof optionSpecs;
export type OptionKey = keyof Specs;
export type RenderOptions = SettingValues<Specs>;
export type RenderOptionsInput = SettingInputs<Specs>;

export const renderOptionsSchema = settingsSchema(optionSpecs).superRefine((o, ctx) => {
  if (o.sslCaCert && !o.sslCert)
    ctx.addIssue({ code: "custom", path: ["sslCaCert"], message: "--ssl-ca-cert needs --ssl-cert" });
  const ports = [o.httpPort, ...(o.sslCert ? [o.httpsPort] : []), o.statsPort];
  if (new Set(ports).size !== ports.length)
    ctx.addIssue({
      code: "custom",
      path: ["httpPort"],
      message: "--http-port, --https-port and --stats-port must differ",
    });
});

/** Validates raw option values; the error names each bad option the way the user spelled it (as a flag). */
export function parseRenderOptions(input: RenderOptionsInput | Record<string, unknown>): RenderOptions {
  return parseSettings(renderOptionsSchema, input, (key) => `--${flagName(key)}`) as RenderOptions;
}

/** Keeps the render options of a merged option record (flags, env and config file carry others too). */
export function pickRenderOptions(all: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return pickSettings(all, optionSpecs);
}
