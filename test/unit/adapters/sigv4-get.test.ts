import { S3Client } from "@aws-sdk/client-s3";
import { SignatureV4 } from "@smithy/signature-v4";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createGetSigner } from "../../../shared/adapters/sigv4-get.js";

// The lean signer against the SDK's own signer, for the request the lean GET sends: the same
// headers, the Authorization header above all, for any key, credentials, region, host and time.

const sha256 = new S3Client({ region: "us-east-1" }).config.sha256;

const segment = fc
  .string({ minLength: 1, maxLength: 20, unit: "grapheme" })
  .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`));

const input: fc.Arbitrary<Input> = fc.record({
  path: fc.array(segment, { minLength: 1, maxLength: 5 }).map((parts) => `/servicelb/${parts.join("/")}`),
  region: fc.constantFrom("us-east-1", "eu-west-3", "ap-southeast-2", "auto"),
  host: fc.constantFrom("127.0.0.1:9000", "servicelb.s3.us-east-1.amazonaws.com", "[::1]:4568", "minio.local"),
  now: fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true }),
  credentials: fc.record({
    accessKeyId: fc.stringMatching(/^[A-Z0-9]{16,20}$/),
    secretAccessKey: fc.string({ minLength: 1, maxLength: 40 }),
    sessionToken: fc.option(fc.base64String({ minLength: 4, maxLength: 200 }), { nil: undefined }),
  }),
});

interface Input {
  path: string;
  region: string;
  host: string;
  now: Date;
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined };
}

async function sdkHeaders(i: Input) {
  const signer = new SignatureV4({
    service: "s3",
    region: i.region,
    credentials: async () => i.credentials,
    sha256,
    uriEscapePath: false,
  });
  const [hostname, port] = i.host.startsWith("[") ? [i.host.slice(0, i.host.indexOf("]") + 1)] : i.host.split(":");
  const signed = await signer.sign(
    {
      method: "GET",
      protocol: "http:",
      hostname: hostname!,
      ...(port ? { port: Number(port) } : {}),
      path: i.path,
      query: {},
      headers: { host: i.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" },
    },
    { signingDate: i.now },
  );
  return signed.headers;
}

describe("createGetSigner", () => {
  it("signs a GET exactly as the SDK's SigV4 signer does, header for header", async () => {
    await fc.assert(
      fc.asyncProperty(input, async (i) => {
        const lean = createGetSigner({ region: i.region, service: "s3", credentials: async () => i.credentials });
        expect(await lean.sign(i.host, i.path, i.now)).toEqual(await sdkHeaders(i));
      }),
      { numRuns: 300 },
    );
  });

  it("derives a new signing key when the day or the secret changes", async () => {
    let credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "one" };
    const lean = createGetSigner({ region: "us-east-1", service: "s3", credentials: async () => credentials });
    const at = (now: Date) => ({ path: "/b/k", region: "us-east-1", host: "h", now, credentials });
    for (const now of [new Date("2026-12-02T23:59:59Z"), new Date("2026-12-03T00:00:00Z")])
      expect(await lean.sign("h", "/b/k", now)).toEqual(await sdkHeaders(at(now)));
    credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "two" };
    const now = new Date("2026-12-03T00:00:01Z");
    expect(await lean.sign("h", "/b/k", now)).toEqual(await sdkHeaders(at(now)));
  });
});
