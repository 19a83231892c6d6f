/*
 * What the Gateway API resolves to (resolve.ts), render-ready: per listener port, the match
 * entries in precedence order, the rules they lead to, and the backends (one per Service port
 * that a rule reaches). Every string here passed a grammar in resolve.ts, and render.ts quotes
 * every value a client or a route author chose.
 */

import type { HostMatch } from "../model/host-match.js";
import type { GatewayStatus } from "./status.js";

export type PathMatch = { type: "Exact" | "PathPrefix"; value: string };

/** One (hostname, match) pair of one rule: a request that satisfies it is handled by the rule. */
export interface MatchEntry {
  /** Index of the rule in its frontend's `rules`. */
  rule: number;
  /** The effective hostname (listener ∩ route), null for any host. */
  host: HostMatch | null;
  path: PathMatch;
  method: string | null;
  headers: ReadonlyArray<{ name: string; value: string }>;
  queryParams: ReadonlyArray<{ name: string; value: string }>;
  /** For precedence across routes: creationTimestamp in ms (Infinity when unknown), `namespace/name`. */
  created: number;
  route: string;
  ruleIndex: number;
  matchIndex: number;
}

export interface HeaderEdits {
  set: ReadonlyArray<{ name: string; value: string }>;
  add: ReadonlyArray<{ name: string; value: string }>;
  remove: readonly string[];
}

export interface Redirect {
  scheme: "http" | "https" | null;
  hostname: string | null;
  /** The port the Location names, null for the scheme's own (80, 443) or the request's listener. */
  port: number | null;
  statusCode: 301 | 302 | 303 | 307 | 308;
}

export interface Rewrite {
  hostname: string | null;
  path:
    | { type: "ReplaceFullPath"; value: string }
    | { type: "ReplacePrefixMatch"; prefix: string; value: string }
    | null;
}

/** A share of a rule's traffic: `backend` is a GatewayBackend's name, or null for a 500 (an invalid reference). */
export interface BackendPick {
  backend: string | null;
  weight: number;
}

export interface ResolvedRule {
  /** `namespace/name` of the route and the rule's position, for comments and warnings. */
  route: string;
  ruleIndex: number;
  requestHeaders: HeaderEdits | null;
  responseHeaders: HeaderEdits | null;
  rewrite: Rewrite | null;
  /** A redirect answers the request itself; otherwise `picks` share it by weight (none, or all 0: a 500). */
  redirect: Redirect | null;
  picks: readonly BackendPick[];
}

export interface GatewayFrontend {
  port: number;
  /** The port is --http-port: the rules go first in the HTTP frontend, before the Services' routes. */
  shared: boolean;
  /**
   * The certificate refs (`namespace/name`) of its HTTPS listeners, bound with TLS on the port;
   * none for HTTP. Every reporting node holds each (certificates.ts).
   */
  certificates: readonly string[];
  entries: readonly MatchEntry[];
  rules: readonly ResolvedRule[];
}

export interface GatewayBackend {
  name: string;
  namespace: string;
  service: string;
  port: number;
  /**
   * Ready endpoints as `ip:port`, none answering 503; placed into server slots by the backend
   * layout (core/model/gateway-slots.ts), where null is a free slot.
   */
  servers: ReadonlyArray<string | null>;
}

export interface GatewayRouting {
  frontends: readonly GatewayFrontend[];
  backends: readonly GatewayBackend[];
  status: GatewayStatus;
  /** Plain-text reasons something was not served, for the dry run's warnings. */
  warnings: readonly string[];
}
