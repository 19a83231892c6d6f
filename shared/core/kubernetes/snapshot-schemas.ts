/*
 * The Kubernetes objects a snapshot keeps, in their own JSON shape as `kubectl get -o json` prints
 * them, and kept as the fields servicelb uses (an EndpointSlice's ready addresses, not its
 * endpoints): the schemas of a Service, an EndpointSlice and v1 Endpoints. Beyond their shape,
 * objects must pass the API server's own checks on the fields servicelb reads
 * (k8s-validation.ts): what a real cluster could never hold is refused here too. Assembling a
 * snapshot from lists of them is snapshot.ts's.
 */

import { z } from "zod";
import { DNS1035_LABEL, DNS1123_LABEL, DNS1123_SUBDOMAIN } from "./k8s-names.js";
import {
  endpointSliceIssues,
  endpointsIssues,
  rfc3339Problem,
  serviceSpecIssues,
  type Issue,
} from "./k8s-validation.js";

// Names end up in backend names, paths and ACLs: hold them to the grammars the API server
// enforces, so that a hand-made snapshot (the dry run takes any) cannot smuggle config lines in.
/** metadata.creationTimestamp: RFC 3339 as the API server writes it, or absent. */
export const creationTimestampSchema = z
  .string()
  .superRefine((value, ctx) => {
    const problem = rfc3339Problem(value);
    if (problem !== null) ctx.addIssue({ code: "custom", message: problem });
  })
  .nullish();

const objectMeta = (name: z.ZodString) =>
  z.object({
    name,
    namespace: z.string().regex(DNS1123_LABEL, "a namespace name (RFC 1123 label)").default("default"),
    labels: z
      .record(z.string(), z.string())
      .nullish()
      .transform((v) => v ?? {}),
    annotations: z
      .record(z.string(), z.string())
      .nullish()
      .transform((v) => v ?? {}),
    resourceVersion: z.string().optional(),
    // Who owns a contested route is decided by age (oldest first), as the Gateway API does.
    creationTimestamp: creationTimestampSchema,
  });
const serviceMeta = objectMeta(z.string().regex(DNS1035_LABEL, "a Service name (RFC 1035 label)"));
const otherMeta = objectMeta(z.string().max(253).regex(DNS1123_SUBDOMAIN, "an object name (RFC 1123 subdomain)"));

function addIssues(ctx: z.RefinementCtx, issues: readonly Issue[]): void {
  for (const issue of issues) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
}

// The API server's defaults for a port that leaves them out: no name, TCP.
const portName = z
  .string()
  .nullish()
  .transform((v) => v ?? "");
const portProtocol = z
  .string()
  .nullish()
  .transform((v) => v ?? "TCP");

const servicePort = z.object({
  name: portName,
  protocol: portProtocol,
  port: z.number().int().min(1).max(65535),
  targetPort: z.union([z.number().int().min(1).max(65535), z.string().min(1)]).nullish(),
});

export const serviceSchema = z
  .object({
    metadata: serviceMeta,
    spec: z.object({
      type: z
        .string()
        .nullish()
        .transform((v) => v ?? "ClusterIP"),
      clusterIP: z.string().nullish(),
      /** Only whether there is one: a Service with a selector gets its EndpointSlices from Kubernetes. */
      selector: z.record(z.string(), z.string()).nullish(),
      ports: z
        .array(servicePort)
        .nullish()
        .transform((v) => v ?? []),
      sessionAffinity: z.string().nullish(),
      sessionAffinityConfig: z
        .object({ clientIP: z.object({ timeoutSeconds: z.number().int().min(1).max(86400).nullish() }).nullish() })
        .nullish(),
    }),
  })
  .superRefine((svc, ctx) => addIssues(ctx, serviceSpecIssues(svc.spec)));

const endpointPort = z.object({
  name: portName,
  protocol: portProtocol,
  port: z.number().int().min(1).max(65535).nullish(),
});

const sliceEndpoint = z.object({
  addresses: z.array(z.string()),
  conditions: z.object({ ready: z.boolean().nullish() }).nullish(),
});

/**
 * The first address of each endpoint that is ready; a nil ready condition means ready
 * (discovery.k8s.io/v1 API contract), and the addresses of one endpoint are fungible (the API
 * docs: consumers use the first).
 */
function readyAddresses(endpoints: ReadonlyArray<z.output<typeof sliceEndpoint>>): string[] {
  const out: string[] = [];
  for (const ep of endpoints) {
    const ip = ep.addresses[0];
    if (ep.conditions?.ready !== false && ip !== undefined) out.push(ip);
  }
  return out;
}

/**
 * Checked whole, kept lean: of its endpoints a slice keeps only the addresses a backend serves
 * (`readyAddresses`). An object, an addresses array and a conditions object per endpoint were
 * most of a snapshot's memory, and a warm instance holds its snapshot between passes.
 */
export const endpointSliceSchema = z
  .object({
    metadata: otherMeta,
    addressType: z.string(),
    ports: z
      .array(endpointPort)
      .nullish()
      .transform((v) => v ?? []),
    endpoints: z
      .array(sliceEndpoint)
      .nullish()
      .transform((v) => v ?? []),
  })
  .superRefine((slice, ctx) => addIssues(ctx, endpointSliceIssues(slice)))
  .transform(({ metadata, addressType, ports, endpoints }) => ({
    metadata,
    addressType,
    ports,
    readyAddresses: readyAddresses(endpoints),
  }));

export const endpointsSchema = z
  .object({
    metadata: otherMeta,
    subsets: z
      .array(
        z.object({
          addresses: z
            .array(z.object({ ip: z.string() }))
            .nullish()
            .transform((v) => v ?? []),
          ports: z
            .array(endpointPort)
            .nullish()
            .transform((v) => v ?? []),
        }),
      )
      .nullish()
      .transform((v) => v ?? []),
  })
  .superRefine((endpoints, ctx) => addIssues(ctx, endpointsIssues(endpoints)));

export type Service = z.output<typeof serviceSchema>;
export type EndpointSlice = z.output<typeof endpointSliceSchema>;
export type Endpoints = z.output<typeof endpointsSchema>;
