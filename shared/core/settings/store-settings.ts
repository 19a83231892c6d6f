/*
 * Where published configs live: one set of settings for the reconcile function, the agent and
 * every CLI command that reads the store, under the same names (SERVICELB_STORE, --store, ...),
 * so one ConfigMap feeds the function and the agents.
 */

import { z } from "zod";
import { bool, type SettingSpec, wholeNumber } from "./settings.js";
import { storeUrlSchema } from "../publish/store-url.js";

export interface StoreSettings {
  /** s3://bucket[/prefix] */
  url: string;
  endpoint?: string;
  region?: string;
  forcePathStyle: boolean;
  /** How many configs a publisher keeps (docs/design.md#invariant-6-history: bounded); readers leave it unset. */
  retain?: number;
}

export const storeSettingSpecs = {
  store: {
    schema: storeUrlSchema.optional(),
    help: "s3://bucket[/prefix] where configs are published",
    placeholder: "url",
  },
  storeEndpoint: {
    schema: z.url({ protocol: /^https?$/, error: "an http(s) URL" }).optional(),
    help: "S3-compatible endpoint, e.g. http://minio:9000 (default: AWS S3)",
    placeholder: "url",
  },
  storeRegion: {
    schema: z
      .string()
      .regex(/^[a-z0-9-]{1,32}$/, "a region name such as eu-west-1")
      .optional(),
    help: "store region (default: $AWS_REGION, else us-east-1)",
    placeholder: "region",
  },
  storePathStyle: { schema: bool.default(false), help: "path-style bucket URLs (MinIO, s3rver)", switch: true },
} as const satisfies Record<string, SettingSpec>;

/** Only a publisher (the reconcile function, `servicelb reconcile --once`) prunes the history. */
export const storeRetainSpec = {
  schema: wholeNumber("a whole number of configs from 1 to 10000", 1, 10_000).default(50),
  help: "configs to keep in the store",
  placeholder: "n",
} as const satisfies SettingSpec;

/** The store settings' parsed values, as the function's and the agent's settings hold them. */
export interface StoreSettingValues {
  store?: string;
  storeEndpoint?: string;
  storeRegion?: string;
  storePathStyle: boolean;
  storeRetain?: number;
}

/**
 * The store's region: the setting, else the usual AWS variables. The store itself falls back to
 * us-east-1, not to the AWS SDK's region chain, so the variables are honoured here.
 */
export function storeRegion(
  given: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  return given ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
}

/** The store the values name, or undefined when no store is set. */
export function storeSettings(
  values: StoreSettingValues,
  env: Readonly<Record<string, string | undefined>>,
): StoreSettings | undefined {
  if (!values.store) return undefined;
  return {
    url: values.store,
    endpoint: values.storeEndpoint,
    region: storeRegion(values.storeRegion, env),
    forcePathStyle: values.storePathStyle,
    ...(values.storeRetain === undefined ? {} : { retain: values.storeRetain }),
  };
}
