import { createHash, createHmac } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLeanGet, type LeanGetOptions } from "../../../shared/adapters/s3-lean-get.js";

// The lean GET's requests against the SDK's own for the same object, at a server that records
// them: the same path (the key escaped as S3 wants it), and a SigV4 signature that verifies by
// the specification, computed here by hand (s3rver does not check V4 signatures).

const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const seen: Array<{ path: string; headers: IncomingHttpHeaders }> = [];
let server: Server;
let endpoint: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ path: req.url ?? "", headers: req.headers });
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** A lean GET of bucket servicelb at `at`, path-style, with these tests' limits unless `o` says otherwise. */
function leanAt(client: S3Client, at: string, o: Partial<LeanGetOptions> = {}) {
  return createLeanGet({
    client,
    bucket: "servicelb",
    region: "us-east-1",
    endpoint: at,
    forcePathStyle: true,
    timeoutMs: 1000,
    deadlineMs: 2000,
    maxObjectBytes: 1024,
    maxSockets: 4,
    describe: (k) => `s3://servicelb/${k}`,
    fallback: () => Promise.reject(new Error("not taken")),
    ...o,
  });
}

const hmac = (key: string | Buffer, text: string) => createHmac("sha256", key).update(text).digest();

/** The signature of a GET as the SigV4 specification computes it from the request received. */
function expectedSignature(path: string, headers: IncomingHttpHeaders): { signature: string; given: string } {
  const auth = String(headers.authorization);
  const [, scope, signedHeaders, given] =
    /^AWS4-HMAC-SHA256 Credential=[^/]+\/([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth) ?? [];
  const names = signedHeaders!.split(";");
  const canonical = [
    "GET",
    path,
    "",
    ...names.map((n) => `${n}:${String(headers[n]).trim()}`),
    "",
    signedHeaders,
    String(headers["x-amz-content-sha256"]),
  ].join("\n");
  const date = String(headers["x-amz-date"]);
  const [day, region, service] = scope!.split("/");
  const toSign = ["AWS4-HMAC-SHA256", date, scope, createHash("sha256").update(canonical).digest("hex")].join("\n");
  const key = hmac(hmac(hmac(hmac(`AWS4${credentials.secretAccessKey}`, day!), region!), service!), "aws4_request");
  return { signature: hmac(key, toSign).toString("hex"), given: given! };
}

describe("a lean GET", () => {
  it("asks for the path the SDK asks for, signed by the specification", async () => {
    const client = new S3Client({ region: "eu-west-1", endpoint, forcePathStyle: true, credentials });
    const key = "fleet/a b!(c)*'~/status/node-a.json";
    const lean = leanAt(client, endpoint, { region: "eu-west-1", describe: (k) => k });
    try {
      const body = await lean.get(key);
      expect(body?.toString()).toBe("{}");
      await (await client.send(new GetObjectCommand({ Bucket: "servicelb", Key: key }))).Body?.transformToString();
      const [ours, sdk] = seen.slice(-2);
      // The SDK adds ?x-id=GetObject, which S3 ignores.
      expect(ours!.path).toBe(sdk!.path.replace(/\?x-id=GetObject$/, ""));
      expect(ours!.path).toBe("/servicelb/fleet/a%20b%21%28c%29%2A%27~/status/node-a.json");
      const { signature, given } = expectedSignature(ours!.path, ours!.headers);
      expect(given).toBe(signature);
      expect(String(ours!.headers.authorization)).toContain("/eu-west-1/s3/aws4_request");
    } finally {
      lean.close();
      client.destroy();
    }
  });

  it("falls back to the client where the endpoint is not signed by plain SigV4", async () => {
    // A multi-region access point ARN as the bucket resolves to SigV4a.
    const client = new S3Client({ region: "us-east-1", credentials });
    const lean = createLeanGet({
      client,
      bucket: "arn:aws:s3::123456789012:accesspoint/mfzwi23gnjvgw.mrap",
      region: "us-east-1",
      timeoutMs: 1000,
      deadlineMs: 2000,
      maxObjectBytes: 1024,
      maxSockets: 4,
      describe: (k) => k,
      fallback: async () => Buffer.from("from the client"),
    });
    try {
      expect((await lean.get("k"))?.toString()).toBe("from the client");
    } finally {
      lean.close();
      client.destroy();
    }
  });
});

describe("a lean GET the store refuses", () => {
  it("reads through the client from then on, for that object and every later one", async () => {
    // A store that wants what only the SDK sends (here its invocation id) answers 403 to ours.
    const picky = createServer((req, res) => {
      if (req.headers["amz-sdk-invocation-id"] === undefined)
        res
          .writeHead(403, { "content-type": "application/xml" })
          .end("<Error><Code>SignatureDoesNotMatch</Code></Error>");
      else res.writeHead(200, { "content-type": "application/json" }).end(`{"path":"${req.url}"}`);
    });
    await new Promise<void>((r) => picky.listen(0, "127.0.0.1", r));
    const at = `http://127.0.0.1:${(picky.address() as AddressInfo).port}`;
    const client = new S3Client({ region: "us-east-1", endpoint: at, forcePathStyle: true, credentials });
    let fallbacks = 0;
    const lean = leanAt(client, at, {
      describe: (k) => k,
      fallback: async (key) => {
        fallbacks++;
        const out = await client.send(new GetObjectCommand({ Bucket: "servicelb", Key: key }));
        return Buffer.from(await (out.Body?.transformToString() ?? ""));
      },
    });
    try {
      expect(JSON.parse(String(await lean.get("status/a.json")))).toEqual({
        path: "/servicelb/status/a.json?x-id=GetObject",
      });
      expect(String(await lean.get("status/b.json"))).toContain("status/b.json");
      expect(fallbacks).toBe(2);
    } finally {
      lean.close();
      client.destroy();
      await new Promise<void>((r) => picky.close(() => r()));
    }
  });
});

describe("many lean GETs at once", () => {
  it("raise no listener warning (status reads 128 records at a time), and a closed store still refuses", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    try {
      const client = new S3Client({ region: "us-east-1", credentials, endpoint, forcePathStyle: true });
      const lean = leanAt(client, endpoint, { maxSockets: 64 });
      const bodies = await Promise.all(Array.from({ length: 50 }, (_, i) => lean.get(`status/node-${i}.json`)));
      expect(bodies.map((b) => b?.toString())).toEqual(Array(50).fill("{}"));
      // A warning is emitted on the next tick.
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain("MaxListenersExceededWarning");
      lean.close();
      await expect(lean.get("status/node-0.json")).rejects.toMatchObject({ transient: false });
      client.destroy();
    } finally {
      process.off("warning", onWarning);
    }
  });
});

describe("a lean GET on a closed store", () => {
  it("fails at once, not transient, and sends nothing", async () => {
    const client = new S3Client({ region: "us-east-1", endpoint, forcePathStyle: true, credentials });
    const lean = leanAt(client, endpoint);
    const before = seen.length;
    lean.close();
    const error = await lean.get("k").catch((e: unknown) => e);
    expect(error).toMatchObject({ transient: false, message: expect.stringContaining("s3://servicelb/k") });
    expect(seen.length).toBe(before);
    client.destroy();
  });
});

describe("a lean GET from a store that drips its answer", () => {
  it("gives up at its deadline on each of two attempts, with a transient error that names the object", async () => {
    let requests = 0;
    const drip = createServer((_req, res) => {
      requests++;
      res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
      // A byte every 50 ms: never idle for the 1 s timeout, never done within the 300 ms deadline.
      const timer = setInterval(() => res.write(" "), 50);
      res.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((r) => drip.listen(0, "127.0.0.1", r));
    const at = `http://127.0.0.1:${(drip.address() as AddressInfo).port}`;
    const client = new S3Client({ region: "us-east-1", endpoint: at, forcePathStyle: true, credentials });
    const lean = leanAt(client, at, { deadlineMs: 300, maxObjectBytes: 4096 });
    try {
      const error = await lean.get("status/a.json").catch((e: unknown) => e);
      expect(error).toMatchObject({
        transient: true,
        message: expect.stringMatching(/^S3 get of s3:\/\/servicelb\/status\/a\.json failed: .*300 ms/),
      });
      expect(requests).toBe(2);
    } finally {
      lean.close();
      client.destroy();
      drip.closeAllConnections();
      await new Promise<void>((r) => drip.close(() => r()));
    }
  });
});
