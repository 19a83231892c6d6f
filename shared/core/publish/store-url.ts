import { z } from "zod";

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export interface StoreLocation {
  bucket: string;
  /** "" or "some/prefix/": no leading slash, trailing slash when non-empty. */
  prefix: string;
}

export function parseStoreUrl(url: string): StoreLocation {
  const match = /^s3:\/\/([^/]*)(?:\/(.*))?$/.exec(url);
  if (!match) throw new Error(`store URL must look like s3://bucket[/prefix], got ${JSON.stringify(url)}`);
  const bucket = match[1] ?? "";
  if (!BUCKET_NAME.test(bucket)) {
    throw new Error(
      `invalid bucket name ${JSON.stringify(bucket)} in store URL ${JSON.stringify(url)}: ` +
        "3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
    );
  }
  const segments = (match[2] ?? "").split("/").filter((segment) => segment !== "");
  return { bucket, prefix: segments.length === 0 ? "" : `${segments.join("/")}/` };
}

/** `s3://bucket[/prefix]` as a setting: the same rule for the functions, the agent and the CLI. */
export const storeUrlSchema = z.string().refine((url) => {
  try {
    parseStoreUrl(url);
    return true;
  } catch {
    return false;
  }
}, "s3://bucket[/prefix] with a valid bucket name");
