/*
 * The validated, render-ready description of the load balancer. Every string in it has passed a
 * grammar (Kubernetes names, annotation grammars, option schemas), so templates may place values
 * without escaping them, except the default page body, which is quoted by the renderer.
 */

import type { Algorithm } from "./annotations.js";
import type { BackendSettings, RedirectCode } from "./backend-settings.js";
import type { HostMatch } from "./host-match.js";
import type { RenderOptions } from "../settings/options.js";
import type { GatewayRouting } from "../gateway/routing.js";

export type Affinity = { kind: "none" } | { kind: "source"; timeoutSeconds: number } | { kind: "cookie" };

export interface Backend {
  name: string;
  namespace: string;
  service: string;
  servicePort: number;
  mode: "http" | "tcp";
  algorithm: Algorithm;
  affinity: Affinity;
  /**
   * The server slots, s1…sN by position (slotName): the `ip:port` / `[ipv6]:port` each holds, or
   * null for a free slot kept for runtime additions. Addresses in an array rather than an object
   * per slot: slots outnumber every other object of a model, and a major GC traces each of them.
   */
  servers: Array<string | null>;
  /**
   * The cookie of each slot for cookie stickiness (null for a free one), derived from its address
   * so that it follows the pod; null when the backend has no cookie affinity.
   */
  cookies: Array<string | null> | null;
  /** Path prefix removed before the request reaches the pod; not for requests routed by host. */
  strip: { prefix: string; unlessHost: HostMatch | null } | null;
  /** Timeouts, checks, access control, limits and protocols from the Service's annotations. */
  settings: BackendSettings;
  /**
   * A spare (backend-layout.ts): it learns which Service it serves from the route, so it strips
   * the path segments the route says (`txn.strip`) instead of a prefix of its own.
   */
  stripByRoute?: boolean;
  /**
   * The Service port whose traffic it carries (core/haproxy-config/service-map.ts), when that is not its own
   * namespace, service and servicePort: the one a spare holds, or null for a free spare or a
   * vacated backend, which carry none (backend-layout.ts).
   */
  carries?: ServicePortRef | null;
}

/** A Service port a backend serves. */
export interface ServicePortRef {
  namespace: string;
  service: string;
  port: number;
}

export type RouteMatch = { kind: "host"; host: HostMatch } | { kind: "path"; prefix: string };

export interface HttpRoute {
  backend: string;
  match: RouteMatch;
  /**
   * The Service terminates TLS (lb.sslTerm) unless "route": "https-redirect" redirects plain HTTP
   * requests with `redirectCode`; "route-and-https" serves them in clear text too (lb.ssl-redirect: false).
   */
  action: "route" | "https-redirect" | "route-and-https";
  redirectCode?: RedirectCode;
  /** A route to a spare by the Service's own path: the leading path segments the spare removes. */
  stripSegments?: 1 | 2;
}

export interface TcpFrontend {
  name: string;
  port: number;
  backend: string;
  /** lb.timeout-client; null: the TCP defaults'. */
  timeoutClient: string | null;
}

export interface Warning {
  service: string;
  port?: number;
  annotation?: string;
  /**
   * Who holds what this Service claimed (a host, a custom path, or the port's own path): a Service
   * (`namespace/name`), a namespace's path space (`namespace/*`), an HTTPRoute (`HTTPRoute namespace/name`),
   * `--host-claims`, or `--own-hosts`
   * for the load balancer's own names and addresses.
   */
  owner?: string;
  message: string;
}

export interface Skipped {
  service: string;
  port?: number;
  reason: string;
}

export interface Model {
  revision: string;
  options: RenderOptions;
  httpRoutes: HttpRoute[];
  httpsRoutes: HttpRoute[];
  tcpFrontends: TcpFrontend[];
  backends: Backend[];
  defaultPage: { status: number; body: string };
  warnings: Warning[];
  skipped: Skipped[];
  /** Server slots that hold an endpoint, over all backends. */
  readyServers: number;
  /** Gateway API routing (core/gateway/), when the snapshot holds Gateway API objects. */
  gateway?: GatewayRouting;
}
