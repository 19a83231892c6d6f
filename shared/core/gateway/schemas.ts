/*
 * The Gateway API objects servicelb reads (gateway.networking.k8s.io: GatewayClass, Gateway and
 * HTTPRoute of v1, ReferenceGrant of v1beta1 or v1), as zod schemas of the fields it uses, with
 * the API's defaults filled in. The grammars are the CRDs' own (apis/v1/shared_types.go), so what
 * a real cluster could never hold is refused as a snapshot problem; what is valid but not
 * supported (a RegularExpression path, a filter servicelb does not implement) passes here and is
 * reported on the route's status by resolve.ts.
 */

import { z } from "zod";
import { creationTimestampSchema } from "../kubernetes/snapshot-schemas.js";
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from "../kubernetes/k8s-names.js";

/** The API group of every kind here. */
export const GATEWAY_GROUP = "gateway.networking.k8s.io";

const name = z.string().min(1).max(253).regex(DNS1123_SUBDOMAIN, "an object name (RFC 1123 subdomain)");
const namespace = z.string().regex(DNS1123_LABEL, "a namespace name (RFC 1123 label)");

const meta = z.object({
  name,
  namespace: namespace.default("default"),
  labels: z
    .record(z.string(), z.string())
    .nullish()
    .transform((v) => v ?? {}),
  resourceVersion: z.string().optional(),
  generation: z.number().int().min(0).nullish(),
  creationTimestamp: creationTimestampSchema,
});

/** shared_types.go Hostname: RFC 1123, optionally `*.` as the whole first label; no IPs checked here. */
const hostname = z
  .string()
  .max(253)
  .regex(
    /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    "a hostname (RFC 1123, optionally *.)",
  );
const sectionName = z.string().max(253).regex(DNS1123_SUBDOMAIN, "a section name");
const port = z.number().int().min(1).max(65535);
const group = z
  .string()
  .max(253)
  .nullish()
  .transform((v) => v ?? "");
const kind = z.string().min(1).max(63);
const optionalNamespace = namespace.nullish().transform((v) => v ?? null);

const labelSelector = z.object({
  matchLabels: z
    .record(z.string(), z.string())
    .nullish()
    .transform((v) => v ?? {}),
  matchExpressions: z
    .array(
      z.object({
        key: z.string(),
        operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
        values: z
          .array(z.string())
          .nullish()
          .transform((v) => v ?? []),
      }),
    )
    .nullish()
    .transform((v) => v ?? []),
});
export type GatewayLabelSelector = z.output<typeof labelSelector>;

/**
 * The status an object holds, kept as read: nothing is rendered from it; the status writer merges
 * servicelb's own into it (status-merge.ts reads it leniently).
 */
const heldStatus = z.unknown().optional();

export const gatewayClassSchema = z.object({
  metadata: meta,
  spec: z.object({ controllerName: z.string().min(1).max(253) }),
  status: heldStatus,
});

/** apis/v1 SecretObjectReference, as a listener's tls.certificateRefs holds it. */
const certificateRef = z.object({
  group,
  kind: kind.default("Secret"),
  name,
  namespace: optionalNamespace,
});
export type CertificateRef = z.output<typeof certificateRef>;

const listener = z.object({
  name: sectionName,
  hostname: hostname.nullish().transform((v) => v ?? null),
  port,
  protocol: z.string().min(1).max(255),
  tls: z
    .object({
      mode: z.enum(["Terminate", "Passthrough"]).default("Terminate"),
      certificateRefs: z
        .array(certificateRef)
        .max(64)
        .nullish()
        .transform((v) => v ?? []),
    })
    .nullish()
    .transform((v) => v ?? null),
  allowedRoutes: z
    .object({
      namespaces: z
        .object({
          from: z.enum(["All", "Same", "Selector"]).default("Same"),
          selector: labelSelector.nullish().transform((v) => v ?? null),
        })
        .nullish()
        .transform((v) => v ?? { from: "Same" as const, selector: null }),
      kinds: z
        .array(z.object({ group: z.string().nullish(), kind }))
        .nullish()
        .transform((v) => v ?? null),
    })
    .nullish()
    .transform((v) => v ?? { namespaces: { from: "Same" as const, selector: null }, kinds: null }),
});

export const gatewaySchema = z.object({
  metadata: meta,
  spec: z.object({
    gatewayClassName: name,
    listeners: z.array(listener).min(1).max(64),
  }),
  status: heldStatus,
});

const headerName = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/, "an HTTP header name");
const headerMatch = z.object({
  type: z.enum(["Exact", "RegularExpression"]).default("Exact"),
  name: headerName,
  value: z.string().max(4096),
});
const pathMatch = z.object({
  type: z.enum(["Exact", "PathPrefix", "RegularExpression"]).default("PathPrefix"),
  value: z.string().max(1024).default("/"),
});
const DEFAULT_PATH = { type: "PathPrefix" as const, value: "/" };
const routeMatch = z.object({
  path: pathMatch.nullish().transform((v) => v ?? DEFAULT_PATH),
  headers: z
    .array(headerMatch)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
  queryParams: z
    .array(
      z.object({
        type: z.enum(["Exact", "RegularExpression"]).default("Exact"),
        name: z.string().min(1).max(256),
        value: z.string().max(1024),
      }),
    )
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
  method: z
    .enum(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"])
    .nullish()
    .transform((v) => v ?? null),
});

const headerValue = z.object({ name: headerName, value: z.string().max(4096) });
const headerModifier = z.object({
  set: z
    .array(headerValue)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
  add: z
    .array(headerValue)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
  remove: z
    .array(headerName)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
});
const pathModifier = z.object({
  type: z.enum(["ReplaceFullPath", "ReplacePrefixMatch"]),
  replaceFullPath: z.string().max(1024).nullish(),
  replacePrefixMatch: z.string().max(1024).nullish(),
});
const filter = z.object({
  type: z.string().min(1),
  requestHeaderModifier: headerModifier.nullish(),
  responseHeaderModifier: headerModifier.nullish(),
  requestRedirect: z
    .object({
      scheme: z.enum(["http", "https"]).nullish(),
      hostname: hostname.nullish(),
      path: pathModifier.nullish(),
      port: port.nullish(),
      statusCode: z
        .union([z.literal(301), z.literal(302), z.literal(303), z.literal(307), z.literal(308)])
        .default(302),
    })
    .nullish(),
  urlRewrite: z.object({ hostname: hostname.nullish(), path: pathModifier.nullish() }).nullish(),
});
export type RouteFilter = z.output<typeof filter>;

const backendRef = z.object({
  group,
  kind: kind.default("Service"),
  name,
  namespace: optionalNamespace,
  port: port.nullish().transform((v) => v ?? null),
  weight: z.number().int().min(0).max(1_000_000).default(1),
  filters: z
    .array(filter)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
});

const DEFAULT_RULE = { matches: [{ path: DEFAULT_PATH, headers: [], queryParams: [], method: null }] };
const rule = z.object({
  name: sectionName.nullish(),
  matches: z
    .array(routeMatch)
    .max(64)
    .nullish()
    .transform((v) => (v && v.length > 0 ? v : DEFAULT_RULE.matches)),
  filters: z
    .array(filter)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
  backendRefs: z
    .array(backendRef)
    .max(16)
    .nullish()
    .transform((v) => v ?? []),
});

export const httpRouteSchema = z.object({
  metadata: meta,
  spec: z.object({
    parentRefs: z
      .array(
        z.object({
          group: z
            .string()
            .nullish()
            .transform((v) => v ?? GATEWAY_GROUP),
          kind: kind.default("Gateway"),
          namespace: optionalNamespace,
          name,
          sectionName: sectionName.nullish().transform((v) => v ?? null),
          port: port.nullish().transform((v) => v ?? null),
        }),
      )
      .max(32)
      .nullish()
      .transform((v) => v ?? []),
    hostnames: z
      .array(hostname)
      .max(16)
      .nullish()
      .transform((v) => v ?? []),
    rules: z
      .array(rule)
      .max(16)
      .nullish()
      .transform((v) => (v && v.length > 0 ? v : [{ ...DEFAULT_RULE, filters: [], backendRefs: [] }])),
  }),
  status: heldStatus,
});

export const referenceGrantSchema = z.object({
  metadata: meta,
  spec: z.object({
    from: z
      .array(z.object({ group: z.string(), kind, namespace }))
      .min(1)
      .max(16),
    to: z
      .array(z.object({ group: z.string(), kind, name: name.nullish().transform((v) => v ?? null) }))
      .min(1)
      .max(16),
  }),
});

/** Only its labels matter: a listener's `allowedRoutes` may select namespaces by them. */
export const namespaceSchema = z.object({ metadata: meta });

export type GatewayClass = z.output<typeof gatewayClassSchema>;
export type Gateway = z.output<typeof gatewaySchema>;
export type Listener = Gateway["spec"]["listeners"][number];
export type HTTPRoute = z.output<typeof httpRouteSchema>;
export type HTTPRouteRule = HTTPRoute["spec"]["rules"][number];
export type HTTPRouteMatch = HTTPRouteRule["matches"][number];
export type HTTPBackendRef = HTTPRouteRule["backendRefs"][number];
export type ReferenceGrant = z.output<typeof referenceGrantSchema>;
export type Namespace = z.output<typeof namespaceSchema>;

/** The Gateway API objects of a snapshot; absent from snapshots that hold none. */
export interface GatewayObjects {
  gatewayClasses: GatewayClass[];
  gateways: Gateway[];
  httpRoutes: HTTPRoute[];
  referenceGrants: ReferenceGrant[];
  /** Namespaces with their labels, when listed; `allowedRoutes` selectors read them. */
  namespaces: Namespace[];
}

export function emptyGatewayObjects(): GatewayObjects {
  return { gatewayClasses: [], gateways: [], httpRoutes: [], referenceGrants: [], namespaces: [] };
}
