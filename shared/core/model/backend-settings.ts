/*
 * Per-Service settings of a backend, beyond routing: timeouts, HTTP health checks, source
 * ranges, rate limits, per-server limits and protocols, and the HTTP → HTTPS redirect. Each
 * annotation has a strict grammar; a value that fails it is ignored with a warning and never
 * reaches the config, so every string here is safe to place unquoted on a config line.
 */

import { ANNOTATION_PREFIX, parseBool, type AnnotationWarning } from "./annotations.js";
import { parseTimeout, TIMEOUT_GRAMMAR } from "../render/haproxy-time.js";
import { describeValue } from "../describe-value.js";
import { DENY_STATUSES, REDIRECT_CODES, type RedirectCode } from "../render/http-statuses.js";
import type { RenderOptions } from "../settings/options.js";
import { MAX_SOURCE_RANGES, readSourceList, type SourceListReading } from "./source-ranges.js";

export const SETTING_ANNOTATIONS = {
  timeoutServer: `${ANNOTATION_PREFIX}lb.timeout-server`,
  timeoutConnect: `${ANNOTATION_PREFIX}lb.timeout-connect`,
  timeoutClient: `${ANNOTATION_PREFIX}lb.timeout-client`,
  timeoutTunnel: `${ANNOTATION_PREFIX}lb.timeout-tunnel`,
  timeoutQueue: `${ANNOTATION_PREFIX}lb.timeout-queue`,
  check: `${ANNOTATION_PREFIX}lb.check`,
  checkHttp: `${ANNOTATION_PREFIX}lb.check-http`,
  allowSourceRange: `${ANNOTATION_PREFIX}lb.allow-source-range`,
  denySourceRange: `${ANNOTATION_PREFIX}lb.deny-source-range`,
  rateLimitRps: `${ANNOTATION_PREFIX}lb.rate-limit-rps`,
  rateLimitStatus: `${ANNOTATION_PREFIX}lb.rate-limit-status`,
  maxconn: `${ANNOTATION_PREFIX}lb.maxconn`,
  backendProtocol: `${ANNOTATION_PREFIX}lb.backend-protocol`,
  proxyProtocol: `${ANNOTATION_PREFIX}lb.proxy-protocol`,
  sslRedirect: `${ANNOTATION_PREFIX}lb.ssl-redirect`,
  sslRedirectCode: `${ANNOTATION_PREFIX}lb.ssl-redirect-code`,
} as const;

export const BACKEND_PROTOCOLS = ["h1", "h2", "h1-ssl", "h2-ssl"] as const;
export type BackendProtocol = (typeof BACKEND_PROTOCOLS)[number];
export { DENY_STATUSES, REDIRECT_CODES, type RedirectCode } from "../render/http-statuses.js";

export interface HttpCheck {
  /** Path with an optional query, sent as `GET <uri>`. */
  uri: string;
  /** Expected status; null: any 2xx or 3xx (HAProxy's default). */
  status: number | null;
}

export interface BackendSettings {
  /** HAProxy times (`500ms`, `30s`), normalised; null: the defaults section's. */
  timeoutServer: string | null;
  timeoutConnect: string | null;
  /** TCP Services only: HTTP Services share the HTTP frontend, whose client timeout is global. */
  timeoutClient: string | null;
  timeoutTunnel: string | null;
  timeoutQueue: string | null;
  /** Whether HAProxy health-checks the pods (each checked server holds a descriptor on every node). */
  check: boolean;
  checkHttp: HttpCheck | null;
  /** CIDRs (or addresses) a client must be in; null: everyone. */
  allowSources: string[] | null;
  /** CIDRs (or addresses) refused; null: no one. */
  denySources: string[] | null;
  /** HTTP only: requests per second per client address, and the status above it. */
  rateLimit: { rps: number; status: number } | null;
  maxconn: number | null;
  /** HTTP only. */
  backendProtocol: BackendProtocol;
  proxyProtocol: "v1" | "v2" | null;
  /** HTTP only, with lb.sslTerm: null serves plain HTTP requests in clear text instead of redirecting them. */
  sslRedirect: RedirectCode | null;
}

export const DEFAULT_BACKEND_SETTINGS: BackendSettings = Object.freeze({
  timeoutServer: null,
  timeoutConnect: null,
  timeoutClient: null,
  timeoutTunnel: null,
  timeoutQueue: null,
  check: false,
  checkHttp: null,
  allowSources: null,
  denySources: null,
  rateLimit: null,
  maxconn: null,
  backendProtocol: "h1",
  proxyProtocol: null,
  sslRedirect: 301,
});

/** What a Service gets for the settings it does not annotate: the global flags. */
export interface SettingDefaults {
  settings: BackendSettings;
  /** --rate-limit-status: also the status of a Service's own lb.rate-limit-rps. */
  rateLimitStatus: number;
}

type DefaultOptions = Pick<
  RenderOptions,
  "activeChecks" | "allowSourceRange" | "denySourceRange" | "rateLimitRps" | "rateLimitStatus" | "sslRedirectCode"
>;
const defaultsByOptions = new WeakMap<DefaultOptions, SettingDefaults>();

export function settingDefaults(options: DefaultOptions): SettingDefaults {
  let defaults = defaultsByOptions.get(options);
  if (defaults) return defaults;
  const settings: BackendSettings = {
    ...DEFAULT_BACKEND_SETTINGS,
    check: options.activeChecks,
    allowSources: options.allowSourceRange ?? null,
    denySources: options.denySourceRange ?? null,
    rateLimit: options.rateLimitRps ? { rps: options.rateLimitRps, status: options.rateLimitStatus } : null,
    sslRedirect: options.sslRedirectCode,
  };
  const unchanged = (Object.keys(settings) as Array<keyof BackendSettings>).every(
    (k) => settings[k] === DEFAULT_BACKEND_SETTINGS[k],
  );
  defaults = {
    settings: unchanged ? DEFAULT_BACKEND_SETTINGS : Object.freeze(settings),
    rateLimitStatus: options.rateLimitStatus,
  };
  defaultsByOptions.set(options, defaults);
  return defaults;
}

const NO_DEFAULTS: SettingDefaults = { settings: DEFAULT_BACKEND_SETTINGS, rateLimitStatus: 429 };

function timeout(value: string): string | { error: string } {
  return parseTimeout(value) ?? { error: `${describeValue(value)} is not ${TIMEOUT_GRAMMAR}` };
}

const PATH_CHAR = "([A-Za-z0-9._~:@+=,-]|%[0-9A-Fa-f]{2})";
const QUERY_CHAR = "([A-Za-z0-9._~:@+=,/&-]|%[0-9A-Fa-f]{2})";
const CHECK = new RegExp(`^(/(${PATH_CHAR}|/)*(\\?${QUERY_CHAR}*)?)(?: ([1-5][0-9][0-9]))?$`);

/** `<path>[?query][ <status>]`, such as `/healthz` or `/ready?full=1 204`. */
export function parseHttpCheck(value: string): HttpCheck | { error: string } {
  const m = value.length <= 256 ? CHECK.exec(value) : null;
  if (!m)
    return {
      error: `${describeValue(value)} is not a path (/… with letters, digits, . _ ~ : @ + = , - / and %XX, optionally ?query) optionally followed by a space and a status`,
    };
  return { uri: m[1]!, status: m[m.length - 1] === undefined ? null : Number(m[m.length - 1]) };
}

function parseInteger(value: string, min: number, max: number): number | { error: string } {
  const n = /^[1-9][0-9]{0,8}$/.test(value) ? Number(value) : NaN;
  return n >= min && n <= max ? n : { error: `${describeValue(value)} is not an integer from ${min} to ${max}` };
}

function oneOf<const T extends string | number>(value: string, allowed: readonly T[]): T | { error: string } {
  const found = allowed.find((a) => String(a) === value);
  return found !== undefined ? found : { error: `${describeValue(value)} is not one of ${allowed.join(", ")}` };
}

type Key = keyof typeof SETTING_ANNOTATIONS;

const REFUSED_EVERYONE = "every client gets 403 (TCP: the connection is closed) until it is fixed";

/** What of a list could not be applied, for a warning: the first bad entries and the count cut. */
function unusable(list: SourceListReading): string {
  const shown = list.invalid.slice(0, 3).map((e) => describeValue(e.replace(/^ +| +$/g, "")));
  const more = list.invalid.length > shown.length ? ` and ${list.invalid.length - shown.length} more` : "";
  const bad =
    shown.length > 0
      ? [`${shown.join(", ")}${more} ${list.invalid.length === 1 ? "is" : "are"} not an address or CIDR`]
      : [];
  const cut = list.beyond > 0 ? [`${list.beyond} entries past the first ${MAX_SOURCE_RANGES}`] : [];
  return [...bad, ...cut].join("; ");
}

/**
 * The allow and deny lists, failing closed (docs/annotations.md#allow-and-deny-lists): a list that cannot be
 * applied as written never lets in a client it was meant to keep out. Dropping entries from an
 * allow list only narrows it, so an allow list keeps its valid entries (none left: nobody is
 * allowed). A deny list cannot drop an entry without letting that entry's clients in, so one
 * that cannot be applied whole refuses every client of the Service.
 */
function readAccessLists(
  annotations: Readonly<Record<string, string>>,
  base: BackendSettings,
): { allow: string[] | null; deny: string[] | null; given: Key[]; warnings: AnnotationWarning[] } {
  const out = {
    allow: base.allowSources,
    deny: base.denySources,
    given: [] as Key[],
    warnings: [] as AnnotationWarning[],
  };
  const warn = (key: Key, message: string) => out.warnings.push({ annotation: SETTING_ANNOTATIONS[key], message });
  const allowRaw = annotations[SETTING_ANNOTATIONS.allowSourceRange];
  if (allowRaw !== undefined) {
    const list = readSourceList(allowRaw);
    out.allow = list.entries;
    out.given.push("allowSourceRange");
    if (list.invalid.length > 0 || list.beyond > 0)
      warn(
        "allowSourceRange",
        list.entries.length > 0
          ? `${unusable(list)}: dropped, the remaining ${list.entries.length} apply`
          : `${unusable(list)}: no entry left, ${REFUSED_EVERYONE}`,
      );
  }
  const denyRaw = annotations[SETTING_ANNOTATIONS.denySourceRange];
  if (denyRaw !== undefined) {
    const list = readSourceList(denyRaw);
    out.deny = list.entries;
    out.given.push("denySourceRange");
    if (list.invalid.length > 0 || list.beyond > 0) {
      out.allow = [];
      warn("denySourceRange", `${unusable(list)}: the list cannot be applied as written, so ${REFUSED_EVERYONE}`);
    }
  }
  return out;
}

/** Settings that mean nothing on a port of the other mode. */
const HTTP_ONLY: readonly Key[] = [
  "rateLimitRps",
  "rateLimitStatus",
  "backendProtocol",
  "sslRedirect",
  "sslRedirectCode",
];
const TCP_ONLY: readonly Key[] = ["timeoutClient"];

export interface ParsedSettings {
  settings: BackendSettings;
  /** The annotations that were set and accepted: what a port of the other mode must report as ignored. */
  given: Key[];
  warnings: AnnotationWarning[];
}

/**
 * The settings a Service's annotations ask for, checked against their grammars, over the global
 * defaults (an annotation replaces its flag's value). `sslTerm` is whether the Service terminates
 * TLS: without it there is no redirect to control.
 */
export function parseBackendSettings(
  annotations: Readonly<Record<string, string>>,
  sslTerm: boolean,
  defaults: SettingDefaults = NO_DEFAULTS,
): ParsedSettings {
  const warnings: AnnotationWarning[] = [];
  const given: Key[] = [];
  const base = defaults.settings;
  const s: BackendSettings = { ...base };
  const read = <T>(key: Key, parse: (raw: string) => T | { error: string }): T | undefined => {
    const raw = annotations[SETTING_ANNOTATIONS[key]];
    if (raw === undefined) return undefined;
    const parsed = parse(raw);
    if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
      warnings.push({ annotation: SETTING_ANNOTATIONS[key], message: `${parsed.error}; ignored` });
      return undefined;
    }
    given.push(key);
    return parsed as T;
  };
  const drop = (key: Key, message: string): void => {
    if (!given.includes(key)) return;
    given.splice(given.indexOf(key), 1);
    warnings.push({ annotation: SETTING_ANNOTATIONS[key], message });
  };

  s.timeoutServer = read("timeoutServer", timeout) ?? null;
  s.timeoutConnect = read("timeoutConnect", timeout) ?? null;
  s.timeoutClient = read("timeoutClient", timeout) ?? null;
  s.timeoutTunnel = read("timeoutTunnel", timeout) ?? null;
  s.timeoutQueue = read("timeoutQueue", timeout) ?? null;
  s.checkHttp = read("checkHttp", parseHttpCheck) ?? null;
  const check = read("check", (v) => {
    const b = parseBool(v);
    return b === undefined ? { error: `${describeValue(v)} is not a boolean (true/false)` } : b;
  });
  if (check === false && s.checkHttp !== null) {
    s.checkHttp = null;
    drop("checkHttp", "ignored: lb.check is false");
  }
  // A check request needs checks on.
  s.check = check ?? (s.checkHttp !== null || base.check);
  const lists = readAccessLists(annotations, base);
  s.allowSources = lists.allow;
  s.denySources = lists.deny;
  given.push(...lists.given);
  warnings.push(...lists.warnings);
  const rps = read("rateLimitRps", (v) => parseInteger(v, 1, 1_000_000));
  const status = read("rateLimitStatus", (v) => oneOf(v, DENY_STATUSES));
  if (rps !== undefined) s.rateLimit = { rps, status: status ?? defaults.rateLimitStatus };
  else if (base.rateLimit && status !== undefined) s.rateLimit = { ...base.rateLimit, status };
  else drop("rateLimitStatus", `ignored: ${SETTING_ANNOTATIONS.rateLimitRps} is not set`);
  s.maxconn = read("maxconn", (v) => parseInteger(v, 1, 100_000)) ?? null;
  s.backendProtocol = read("backendProtocol", (v) => oneOf(v, BACKEND_PROTOCOLS)) ?? "h1";
  s.proxyProtocol = read("proxyProtocol", (v) => oneOf(v, ["v1", "v2"])) ?? null;

  const redirect = read("sslRedirect", (v) => {
    const b = parseBool(v);
    return b === undefined ? { error: `${describeValue(v)} is not a boolean (true/false)` } : b;
  });
  const code = read("sslRedirectCode", (v) => oneOf(v, REDIRECT_CODES));
  if (!sslTerm) {
    const why = "ignored: the Service does not set lb.sslTerm, so there is no HTTPS to redirect to";
    drop("sslRedirect", why);
    drop("sslRedirectCode", why);
  } else if (redirect === false) {
    s.sslRedirect = null;
    drop("sslRedirectCode", "ignored: lb.ssl-redirect is false");
  } else if (code !== undefined) {
    s.sslRedirect = code;
  }
  // Most Services set none: they share one settings object.
  return { settings: given.length === 0 ? base : s, given, warnings };
}

const NOT_FOR: Record<"http" | "tcp", { keys: readonly Key[]; why: string; clear: Partial<BackendSettings> }> = {
  tcp: {
    keys: HTTP_ONLY,
    why: "applies to HTTP ports only",
    clear: { rateLimit: null, backendProtocol: "h1", sslRedirect: DEFAULT_BACKEND_SETTINGS.sslRedirect },
  },
  http: {
    keys: TCP_ONLY,
    why: "HTTP Services share the HTTP frontend, whose client timeout is --timeout-client (HAProxy 2.6 cannot set it per backend); applies to TCP ports only",
    clear: { timeoutClient: null },
  },
};

/** The settings of one port of the Service, with a warning for each given setting that means nothing there. */
export function settingsFor(
  parsed: ParsedSettings,
  mode: "http" | "tcp",
): { settings: BackendSettings; ignored: AnnotationWarning[] } {
  const rule = NOT_FOR[mode];
  const ignored = parsed.given
    .filter((k) => rule.keys.includes(k))
    .map((k) => ({ annotation: SETTING_ANNOTATIONS[k], message: `ignored on this port: ${rule.why}` }));
  // A global default (--rate-limit-rps) reaches ports of the other mode without an annotation.
  const foreign = (Object.keys(rule.clear) as Array<keyof BackendSettings>).some(
    (k) => parsed.settings[k] !== rule.clear[k],
  );
  return {
    settings: ignored.length === 0 && !foreign ? parsed.settings : { ...parsed.settings, ...rule.clear },
    ignored,
  };
}
