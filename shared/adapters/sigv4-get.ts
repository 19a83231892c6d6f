/*
 * AWS Signature Version 4 for the one request the lean GET sends (s3-lean-get.ts): a GET of a
 * path (signed as sent: S3 does not encode it a second time), no query, no body (`UNSIGNED-PAYLOAD`), signed over `host`, `x-amz-content-sha256`,
 * `x-amz-date` and, with temporary credentials, `x-amz-security-token`. The SDK's general signer
 * (@smithy/signature-v4) spends about five times the CPU per request on what this request does
 * not have (queries, bodies, presigning, header rules), and `servicelb status` signs a thousand
 * of them; its answers are the reference this one is tested against, header for header
 * (test/unit/adapters/sigv4-get.test.ts).
 *
 * The signing key depends on the secret, the day, the region and the service only, so it is
 * derived once a day per secret (credentials that rotate get a key of their own).
 */

import { createHash, createHmac } from "node:crypto";

export interface SigningCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
}

export interface GetSigner {
  /** The headers to send with `GET path` to `host` (as the Host header gives it, port included). */
  sign(host: string, path: string, now?: Date): Promise<Record<string, string>>;
}

const ALGORITHM = "AWS4-HMAC-SHA256";
const UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD";

const hmac = (key: string | Buffer, text: string) => createHmac("sha256", key).update(text, "utf8").digest();

/** `20261203T011500Z`: ISO 8601 basic, seconds, UTC. */
function amzDate(now: Date): string {
  return now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
}

export function createGetSigner(o: {
  region: string;
  service: string;
  /** The client's credential provider (memoized by the SDK: it refreshes what expires). */
  credentials: () => Promise<SigningCredentials>;
}): GetSigner {
  let cached: { secret: string; day: string; key: Buffer } | undefined;

  function signingKey(secret: string, day: string): Buffer {
    if (cached?.secret !== secret || cached.day !== day) {
      const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), o.region), o.service), "aws4_request");
      cached = { secret, day, key };
    }
    return cached.key;
  }

  return {
    async sign(host, path, now = new Date()) {
      const c = await o.credentials();
      const date = amzDate(now);
      const day = date.slice(0, 8);
      const headers: Record<string, string> = {
        host,
        "x-amz-content-sha256": UNSIGNED_PAYLOAD,
        "x-amz-date": date,
        ...(c.sessionToken ? { "x-amz-security-token": c.sessionToken } : {}),
      };
      // Already in code point order, as the canonical headers must be.
      const names = Object.keys(headers);
      const canonical = [
        "GET",
        path,
        "",
        ...names.map((n) => `${n}:${headers[n]!.trim()}`),
        "",
        names.join(";"),
        UNSIGNED_PAYLOAD,
      ].join("\n");
      const scope = `${day}/${o.region}/${o.service}/aws4_request`;
      const toSign = `${ALGORITHM}\n${date}\n${scope}\n${createHash("sha256").update(canonical, "utf8").digest("hex")}`;
      const signature = createHmac("sha256", signingKey(c.secretAccessKey, day)).update(toSign, "utf8").digest("hex");
      headers.authorization = `${ALGORITHM} Credential=${c.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
      return headers;
    },
  };
}
