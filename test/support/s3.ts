import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HeadObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { makeS3rverWritesAtomic } from "../../shared/dev/s3rver-atomic.js";
import { REFUSING_PORT } from "./net.js";

// s3rver ships no type declarations; describe the part we use instead of adding a .d.ts.
interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  directory: string;
  silent: boolean;
  configureBuckets: Array<{ name: string }>;
}) => S3rverInstance;

const S3rver = createRequire(import.meta.url)("s3rver") as S3rverConstructor;

/** s3rver accepts any well-formed signature made with these. */
export const S3RVER_CREDENTIALS = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };

export interface TestS3 {
  endpoint: string;
  bucket: string;
  /** A raw client for the test to inspect or tamper with objects behind the store's back. */
  client: S3Client;
  /** Stops the server (so the endpoint refuses connections) and removes its data. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Another body under an object's key, behind the store's back: its metadata stays, the size in it
 * made to match, so that only the digest can tell.
 */
export async function replaceBody(s3: TestS3, key: string, body: string): Promise<void> {
  const { Metadata } = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
  await s3.client.send(
    new PutObjectCommand({
      Bucket: s3.bucket,
      Key: key,
      Body: body,
      Metadata: { ...Metadata, bytes: String(Buffer.byteLength(body)) },
    }),
  );
}

export function createS3Client(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
  });
}

/**
 * A real S3 protocol server on a free loopback port, with one empty bucket.
 * Keep listings under 1000 keys: s3rver 3.7.1 answers a truncated ListObjectsV2 with a 500
 * on Node 20, because its continuation tokens use DES, which OpenSSL 3 no longer offers.
 */
export async function startS3(bucket = "servicelb-test"): Promise<TestS3> {
  const directory = await mkdtemp(join(tmpdir(), "servicelb-s3-"));
  makeS3rverWritesAtomic();
  const server = new S3rver({
    address: "127.0.0.1",
    port: 0,
    directory,
    silent: true,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = createS3Client(endpoint);
  let stopped = false;
  return {
    endpoint,
    bucket,
    client,
    async stop() {
      if (stopped) return;
      stopped = true;
      client.destroy();
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/** An endpoint where nothing listens: "S3 is down" (net.ts REFUSING_PORT). */
export function deadEndpoint(): string {
  return `http://127.0.0.1:${REFUSING_PORT}`;
}

/** An endpoint that accepts connections and never answers: a hung S3. */
export async function hangingEndpoint(): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
