import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createObjectStore,
  StoreError,
  type ObjectStore,
  type ObjectStoreOptions,
} from "../../shared/adapters/store.js";
import { dripProxy, type DripProxy } from "../support/drip.js";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../support/s3.js";

/**
 * The store's bounds against a real S3 server behind a proxy that answers slowly: an overall
 * deadline per request (the SDK's timeouts are idle timeouts, which a drip never trips), a size
 * cap on bodies, and close() ending what is in flight.
 */

let s3: TestS3;
let drip: DripProxy;
let prefixes = 0;
const opened: ObjectStore[] = [];

beforeAll(async () => {
  s3 = await startS3();
  drip = await dripProxy(s3.endpoint);
});
afterAll(async () => {
  await drip?.stop();
  await s3?.stop();
});
afterEach(() => {
  drip.mode = () => "pass";
  for (const s of opened.splice(0)) s.close();
});

/** A store through the proxy and one straight to s3rver, on one fresh prefix. */
function stores(extra: Partial<ObjectStoreOptions> = {}): { viaProxy: ObjectStore; direct: ObjectStore } {
  const url = `s3://${s3.bucket}/limits-${++prefixes}`;
  const common = { url, forcePathStyle: true, credentials: S3RVER_CREDENTIALS };
  // The idle timeout is longer than the drip interval: only the overall deadline can end a dripped request.
  const viaProxy = createObjectStore({ ...common, endpoint: drip.endpoint, timeoutMs: 5000, ...extra });
  const direct = createObjectStore({ ...common, endpoint: s3.endpoint });
  opened.push(viaProxy, direct);
  return { viaProxy, direct };
}

const CONFIG = `global\n    maxconn 100\n${"# filler\n".repeat(200)}`;

describe("overall deadline", () => {
  it("ends a GET whose body drips, past its idle timeout, with a transient StoreError", async () => {
    const { viaProxy, direct } = stores({ deadlineMs: 1000 });
    const { key } = await direct.publish({ config: CONFIG, revision: "1", generator: "test" });
    drip.mode = (req) =>
      req.method === "GET" && req.url?.includes("/configs/") && !req.url.includes("list-type") ? "drip" : "pass";
    const err = await viaProxy.get(key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({
      transient: true,
      message: expect.stringContaining("no complete answer within 1000 ms"),
    });
    expect(drip.seen.some((r) => r.mode === "drip")).toBe(true);
    // The same store goes on working once the store answers normally.
    drip.mode = () => "pass";
    expect((await viaProxy.get(key)).config).toBe(CONFIG);
  });

  it("ends a listing that never answers", async () => {
    const { viaProxy } = stores({ deadlineMs: 1000 });
    drip.mode = () => "stall";
    await expect(viaProxy.history({ limit: 1 })).rejects.toMatchObject({
      name: "StoreError",
      transient: true,
      message: expect.stringContaining("no complete answer within 1000 ms"),
    });
    // Not merely given up on: the connection is closed.
    await expect.poll(() => drip.held).toBe(0);
  });

  it("close() ends the requests in flight at once, whatever their deadline", async () => {
    const { viaProxy } = stores({ deadlineMs: 600_000 });
    drip.mode = () => "stall";
    const before = drip.seen.length;
    const pending = viaProxy.history({ limit: 1 }).catch((e: unknown) => e);
    await expect.poll(() => drip.seen.length).toBeGreaterThan(before);
    viaProxy.close();
    expect(await pending).toMatchObject({
      name: "StoreError",
      message: expect.stringContaining("the store client was closed"),
    });
    await expect.poll(() => drip.held).toBe(0);
  });
});

describe("size cap", () => {
  it("refuses an object over the cap from its Content-Length, unread, as a permanent error", async () => {
    const { viaProxy, direct } = stores({ maxObjectBytes: 1024 });
    const { key } = await direct.publish({ config: CONFIG, revision: "1", generator: "test" });
    const err = await viaProxy.get(key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({
      transient: false,
      message: expect.stringMatching(/the object is \d+ bytes, over the cap of 1024 bytes; refused without reading it/),
    });
  });

  it("stops reading a body without Content-Length once it passes the cap", async () => {
    const { viaProxy, direct } = stores({ maxObjectBytes: 1024 });
    const { key } = await direct.publish({ config: CONFIG, revision: "1", generator: "test" });
    drip.mode = () => "chunked";
    await expect(viaProxy.get(key)).rejects.toMatchObject({
      transient: false,
      message: expect.stringContaining("the body passed the cap of 1024 bytes"),
    });
  });

  it("reads an object at the cap", async () => {
    const { viaProxy, direct } = stores({ maxObjectBytes: Buffer.byteLength(CONFIG) });
    const { key } = await direct.publish({ config: CONFIG, revision: "1", generator: "test" });
    drip.mode = () => "chunked";
    expect((await viaProxy.get(key)).config).toBe(CONFIG);
  });
});
