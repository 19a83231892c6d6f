import { describe, expect, it } from "vitest";
import { parseStoreUrl, storeUrlSchema } from "../../../../shared/core/publish/store-url.js";

describe("parseStoreUrl", () => {
  it.each([
    ["s3://configs", { bucket: "configs", prefix: "" }],
    ["s3://configs/", { bucket: "configs", prefix: "" }],
    ["s3://configs/prod", { bucket: "configs", prefix: "prod/" }],
    ["s3://configs//prod//eu/", { bucket: "configs", prefix: "prod/eu/" }],
  ])("%s", (url, expected) => {
    expect(parseStoreUrl(url)).toEqual(expected);
  });

  it.each(["configs", "https://configs/x", "s3://", "s3://UPPER", "s3://a", "s3://-dash", `s3://${"b".repeat(64)}`])(
    "refuses %s with the rule",
    (url) => {
      expect(() => parseStoreUrl(url)).toThrow(/store URL|bucket name/);
      expect(storeUrlSchema.safeParse(url).success).toBe(false);
    },
  );
});
