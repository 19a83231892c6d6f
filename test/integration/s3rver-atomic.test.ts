/*
 * The tests' and the local stack's S3 replaces an object whole on every PUT, as S3 does
 * (shared/dev/s3rver-atomic.ts): a record rewritten while agents read it is read whole, old or
 * new, never empty or cut short. s3rver as shipped truncates the file and writes it in place, and
 * a canary test read rollout.json half-written on a loaded machine.
 */
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3, type TestS3 } from "../support/s3.js";

describe("s3rver with atomic writes", () => {
  let s3: TestS3;
  beforeAll(async () => {
    s3 = await startS3();
  });
  afterAll(() => s3.stop());

  it("reads a key rewritten 100 times while it is read, each time whole", async () => {
    const bodies = ["a", "b", "c", "d"].map((c) => JSON.stringify({ fill: c.repeat(50_000) }));
    const Key = "records/rollout.json";
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: bodies[0] }));
    let writing = true;
    const writes = (async () => {
      for (let i = 0; i < 100; i++)
        await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: bodies[i % bodies.length] }));
      writing = false;
    })();
    const seen: string[] = [];
    const reader = async () => {
      while (writing) {
        const r = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key }));
        seen.push(await r.Body!.transformToString());
      }
    };
    await Promise.all([writes, reader(), reader(), reader()]);
    expect(seen.length).toBeGreaterThan(20);
    expect(seen.filter((body) => !bodies.includes(body)).map((b) => b.length)).toEqual([]);
  });

  it("still answers a missing key 404, a range, and an empty object", async () => {
    await expect(s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: "none" }))).rejects.toMatchObject({
      name: "NoSuchKey",
    });
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: "r", Body: "0123456789" }));
    const part = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: "r", Range: "bytes=2-4" }));
    expect(await part.Body!.transformToString()).toBe("234");
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: "empty", Body: "" }));
    const empty = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: "empty" }));
    expect(await empty.Body!.transformToString()).toBe("");
  });
});
