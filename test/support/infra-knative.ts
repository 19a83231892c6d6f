import { z } from "zod";

/**
 * The Knative kinds infra/ uses, as strict zod schemas of the fields servicelb sets, taken from
 * Knative's Go types: serving pkg/apis/serving/fieldmask.go (what a Revision may carry),
 * eventing pkg/apis/sources/v1 (ApiServerSource, PingSource), pkg/apis/eventing/v1 (Broker,
 * Trigger) and pkg/apis/duck/v1 (delivery). Strict, so that a misspelt field fails here instead
 * of being dropped by the API server.
 */

const name = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
  .max(63);
const stringMap = z.record(z.string(), z.string());

const metadata = z.strictObject({
  name,
  namespace: name.optional(),
  labels: stringMap.optional(),
  annotations: stringMap.optional(),
});

const kReference = z.strictObject({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  name,
  namespace: name.optional(),
});
const destination = z
  .strictObject({ ref: kReference.optional(), uri: z.url().optional() })
  .refine((d) => d.ref !== undefined || d.uri !== undefined, "ref or uri");

// ISO 8601 durations, as period.Parse reads them (PT0.5S, PT1M, P1D).
const isoDuration = z
  .string()
  .regex(/^P(?!$)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$/, "an ISO 8601 duration such as PT0.5S");

const delivery = z.strictObject({
  deadLetterSink: destination.optional(),
  retry: z.number().int().min(0).optional(),
  backoffPolicy: z.enum(["linear", "exponential"]).optional(),
  backoffDelay: isoDuration.optional(),
});

const labelSelector = z.strictObject({
  matchLabels: stringMap.optional(),
  matchExpressions: z
    .array(
      z.strictObject({
        key: z.string(),
        operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
        values: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});

const sourceSpec = { sink: destination, ceOverrides: z.strictObject({ extensions: stringMap }).optional() };

const cronField = String.raw`(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?(,(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?)*`;

export const knativeSchemas = {
  "eventing.knative.dev/v1/Broker": z.strictObject({
    apiVersion: z.literal("eventing.knative.dev/v1"),
    kind: z.literal("Broker"),
    metadata,
    spec: z.strictObject({ config: kReference.optional(), delivery: delivery.optional() }).optional(),
  }),
  "eventing.knative.dev/v1/Trigger": z.strictObject({
    apiVersion: z.literal("eventing.knative.dev/v1"),
    kind: z.literal("Trigger"),
    metadata,
    spec: z.strictObject({
      broker: name,
      filter: z.strictObject({ attributes: stringMap }).optional(),
      subscriber: destination,
      delivery: delivery.optional(),
    }),
  }),
  "sources.knative.dev/v1/ApiServerSource": z.strictObject({
    apiVersion: z.literal("sources.knative.dev/v1"),
    kind: z.literal("ApiServerSource"),
    metadata,
    spec: z.strictObject({
      ...sourceSpec,
      mode: z.enum(["Reference", "Resource"]),
      serviceAccountName: name.optional(),
      namespaceSelector: labelSelector.optional(),
      resources: z
        .array(
          z.strictObject({
            apiVersion: z.string().min(1),
            kind: z.string().min(1),
            selector: labelSelector.optional(),
          }),
        )
        .min(1),
      owner: z.strictObject({ apiVersion: z.string(), kind: z.string() }).optional(),
    }),
  }),
  "sources.knative.dev/v1/PingSource": z.strictObject({
    apiVersion: z.literal("sources.knative.dev/v1"),
    kind: z.literal("PingSource"),
    metadata,
    spec: z
      .strictObject({
        ...sourceSpec,
        schedule: z.string().regex(new RegExp(`^${cronField}( ${cronField}){4}$`), "five cron fields"),
        timezone: z.string().optional(),
        contentType: z.string().optional(),
        data: z.string().optional(),
        dataBase64: z.base64().optional(),
      })
      .refine((s) => s.data === undefined || s.dataBase64 === undefined, "data and dataBase64 are mutually exclusive"),
  }),
  "serving.knative.dev/v1/Service": z.strictObject({
    apiVersion: z.literal("serving.knative.dev/v1"),
    kind: z.literal("Service"),
    metadata,
    spec: z.strictObject({
      template: z.strictObject({
        metadata: z.strictObject({ labels: stringMap.optional(), annotations: stringMap.optional() }).optional(),
        spec: z.strictObject({
          // The PodSpec fields Knative accepts without feature flags (fieldmask.go PodSpecMask).
          serviceAccountName: name.optional(),
          containers: z.array(z.unknown()).min(1),
          volumes: z.array(z.unknown()).optional(),
          imagePullSecrets: z.array(z.unknown()).optional(),
          enableServiceLinks: z.boolean().optional(),
          // RevisionSpec's own fields.
          containerConcurrency: z.number().int().min(0).optional(),
          timeoutSeconds: z.number().int().min(1).optional(),
        }),
      }),
    }),
  }),
} as const;

/** ContainerMask: what a Revision's container may set. Values are checked by kubernetes-models. */
export const knativeContainer = z.strictObject({
  name: z.string().optional(),
  image: z.string().min(1),
  args: z.array(z.string()).optional(),
  command: z.array(z.string()).optional(),
  env: z.array(z.unknown()).optional(),
  envFrom: z.array(z.unknown()).optional(),
  workingDir: z.string().optional(),
  imagePullPolicy: z.string().optional(),
  livenessProbe: z.unknown().optional(),
  readinessProbe: z.unknown().optional(),
  // One port at most, and never a host port (ContainerPortMask).
  ports: z
    .array(
      z.strictObject({
        containerPort: z.number().int(),
        name: z.enum(["http1", "h2c"]).optional(),
        protocol: z.literal("TCP").optional(),
      }),
    )
    .max(1)
    .optional(),
  resources: z.unknown().optional(),
  // SecurityContextMask; allowPrivilegeEscalation and seccompProfile since Knative Serving 1.8.
  securityContext: z
    .strictObject({
      capabilities: z.strictObject({ drop: z.array(z.string()).optional() }).optional(),
      readOnlyRootFilesystem: z.boolean().optional(),
      runAsUser: z.number().int().optional(),
      runAsGroup: z.number().int().optional(),
      runAsNonRoot: z.boolean().optional(),
      allowPrivilegeEscalation: z.literal(false).optional(),
      seccompProfile: z.strictObject({ type: z.enum(["RuntimeDefault", "Localhost"]) }).optional(),
    })
    .optional(),
  terminationMessagePath: z.string().optional(),
  terminationMessagePolicy: z.string().optional(),
  volumeMounts: z
    .array(
      z.strictObject({
        name: z.string(),
        mountPath: z.string(),
        readOnly: z.boolean().optional(),
        subPath: z.string().optional(),
      }),
    )
    .optional(),
});

/** VolumeSourceMask: Secret, ConfigMap and projected volumes only (emptyDir needs a feature flag). */
export const knativeVolume = z.union([
  z.strictObject({ name: z.string(), secret: z.unknown() }),
  z.strictObject({ name: z.string(), configMap: z.unknown() }),
  z.strictObject({ name: z.string(), projected: z.unknown() }),
]);
