/*
 * What the templates see: the template files a config is rendered from, the view each of them
 * reads (the main file's, and one per repeated item), and the sections of the main template that
 * the renderer fills in from cached bytes (render.ts).
 */

import type { Inline } from "./fragment.js";

/** The template sources a config is rendered from: the main file and one fragment per repeated item. */
export interface TemplateSet {
  main: string;
  backend: string;
  server: string;
  httpRule: string;
  tcpFrontend: string;
}

export const TEMPLATE_FILES: Record<keyof TemplateSet, string> = {
  main: "haproxy.cfg.liquid",
  backend: "backend.liquid",
  server: "server.liquid",
  httpRule: "http-rule.liquid",
  tcpFrontend: "tcp-frontend.liquid",
};

/**
 * The node variable HAProxy reads the stats password from, so it is never in a config. The agent
 * refuses a config that references it while the variable is unset (HAProxy would expand it to "").
 */
export const STATS_PASSWORD_VARIABLE = "SERVICELB_STATS_PASSWORD";
export const STATS_PASSWORD_REF = `\${${STATS_PASSWORD_VARIABLE}}`;

export interface BackendView {
  name: string;
  defaults: string;
  algorithm: string;
  stick_expire: string | null;
  cookie: boolean;
  strip_regex: string | null;
  strip_prefix: string | null;
  strip_unless: string | null;
  /** The server lines, written by the server fragment straight into the output. */
  servers: Inline;
  namespace: string;
  service: string;
  port: number;
  /** Per-Service timeouts (null: the defaults section's). */
  timeout_server: string | null;
  timeout_connect: string | null;
  timeout_tunnel: string | null;
  timeout_queue: string | null;
  /** HTTP health check: `GET <check_uri>`, expecting `check_status` (null: any 2xx/3xx). */
  check_uri: string | null;
  check_status: number | null;
  /** The source lists' pattern files (`acl … src -f <file>`), relative to haproxy.cfg; core/haproxy-config/pattern-files.ts. */
  src_allow_file: string | null;
  src_deny_file: string | null;
  /**
   * The same lists space-separated, for a custom template that still puts them on the `acl` line:
   * HAProxy 2.6 reads 64 words a line, so 60 entries fit there; the files hold up to 10,000.
   */
  src_allow: string | null;
  src_deny: string | null;
  tcp: boolean;
  /** Requests per second per client address above which `rate_limit_status` is answered. */
  rate_limit: number | null;
  rate_limit_status: number | null;
  /** Parameters every server of the backend takes (its `default-server` line): maxconn, protocol, PROXY protocol. */
  server_params: string | null;
  /** A spare: it strips the leading path segments the route says (`txn.strip`, haproxy-config/route-maps.ts). */
  strip_by_route: boolean;
}

export interface ServerView {
  name: string;
  address: string;
  disabled: boolean;
  /** The health-check interval; the built-in templates set it once, in the defaults sections. */
  inter: string;
  cookie: string | null;
}

export interface RuleView {
  backend: string;
  condition: string;
}

export interface TcpView {
  name: string;
  bind: string;
  port: number;
  backend: string;
  timeout_client: string | null;
  /** Space-separated CIDRs of trusted proxies that send a PROXY protocol header. */
  accept_proxy: string | null;
}

/** The repeated sections of the main template, filled in from cached per-item bytes. */
export const SLOTS = ["http_rules", "http_route_maps", "https_rules", "tcp_frontends", "backends"] as const;
export type Slot = (typeof SLOTS)[number];

export interface MainView {
  stats_socket: string;
  hard_stop_after: string;
  server_state_file: string;
  syslog: boolean;
  https: boolean;
  /** The path `--ssl-cert` names (without `crt-list:`). */
  ssl_cert: string | null;
  /** How the bind line reads it: `crt` (a PEM file or a directory) or `crt-list`. */
  ssl_cert_keyword: "crt" | "crt-list";
  ssl_ca_cert: string | null;
  hsts_max_age: number | null;
  bind: string;
  http_port: number;
  https_port: number;
  stats_bind: string;
  stats_port: number;
  stats_user: string | null;
  /** `"${SERVICELB_STATS_PASSWORD}"`: HAProxy expands it on the node. */
  stats_password_ref: string;
  redirect: string | null;
  /** One backend per redirect status the HTTPS Services use. */
  redirects: Array<{ name: string; code: number }>;
  timeout_server: string;
  timeout_connect: string;
  timeout_client: string;
  timeout_tunnel: string;
  timeout_queue: string | null;
  /** Space-separated CIDRs of trusted proxies that send a PROXY protocol header. */
  accept_proxy: string | null;
  default_status: number;
  default_body: string | null;
  has_tcp_frontends: boolean;
  check_interval: string;
}

/**
 * True when the main template only prints each section (`{{ backends }}`), never tests or filters
 * it. Captured output could hold a printed section and be tested afterwards, so a template that
 * captures anything is never plain.
 */
export function slotsArePlain(source: string): boolean {
  if (/\{%-?\s*(capture|liquid)\b/.test(source)) return false;
  return SLOTS.every((slot) => {
    const uses = source.match(new RegExp(`\\b${slot}\\b`, "g"))?.length ?? 0;
    const prints = source.match(new RegExp(`\\{\\{-?\\s*${slot}\\s*-?\\}\\}`, "g"))?.length ?? 0;
    return uses === prints;
  });
}

/** Whether the main template places a section at all: one it does not print is not rendered. */
export function printsSlot(source: string, slot: Slot): boolean {
  return new RegExp(`\\b${slot}\\b`).test(source);
}
