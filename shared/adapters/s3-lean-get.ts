/*
 * GetObject of a small object over node:http, signed by SigV4 (sigv4-get.ts) with the client's
 * own credentials and endpoint, without the SDK's request pipeline. `servicelb status`
 * and the reconcile function read every node's report (status/<node>.json, under a KiB): through
 * the client's middleware stack a thousand of them cost most of the command's CPU (BENCHMARKS.md,
 * "`servicelb status` against 1,000 node records"), this path a fraction of that. Everything else
 * — configs, chunks, the listing, writes — goes through the client.
 *
 * The same limits and errors as the client's requests (s3-blob-store.ts, store-limits.ts): an
 * idle timeout and an overall deadline, the body cap, two attempts for a transient failure, and a
 * StoreError that names the object and the store. An endpoint the signer cannot sign for plainly
 * (SigV4a, S3 Express, one that wants headers of its own) is not taken: `fallback`, the client's
 * GetObject, reads there; so does every read after the store refused one of this path's requests
 * (400, 401, 403), which the client may still be allowed.
 */

import { setMaxListeners } from "node:events";
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { S3Client } from "@aws-sdk/client-s3";
import { TRANSIENT_NETWORK_CODES } from "./network-errors.js";
import { createGetSigner, type GetSigner } from "./sigv4-get.js";
import { errorText, StoreError } from "./store-error.js";
import { ObjectTooLargeError, StoreClosedError, StoreDeadlineError } from "./store-limits.js";

export interface LeanGetOptions {
  client: S3Client;
  bucket: string;
  region: string;
  endpoint?: string;
  forcePathStyle?: boolean;
  /** Connect and idle timeout. */
  timeoutMs: number;
  /** Overall deadline of one attempt, body included. */
  deadlineMs: number;
  maxObjectBytes: number;
  /** Sockets open to the store at once. */
  maxSockets: number;
  /** For error messages. */
  describe: (key: string) => string;
  /** The client's own GetObject, for an endpoint this path does not sign for. */
  fallback: (key: string) => Promise<Buffer | null>;
}

export interface LeanGet {
  /** The body, or null when there is none; a StoreError otherwise. */
  get(key: string): Promise<Buffer | null>;
  close(): void;
}

interface Target {
  url: URL;
  signer: GetSigner;
}

/** A delay before the second attempt, as the SDK's standard retry waits (up to 100 ms here). */
const RETRY_BASE_MS = 100;

export function createLeanGet(o: LeanGetOptions): LeanGet {
  const config = o.client.config;
  const closed = new AbortController();
  // One listener per request in flight, each removed when its request closes: `status` has 128
  // in flight, and Node would warn of a leak (on the operator's terminal) past 10.
  setMaxListeners(0, closed.signal);
  const agents = {
    http: new HttpAgent({ keepAlive: true, maxSockets: o.maxSockets }),
    https: new HttpsAgent({ keepAlive: true, maxSockets: o.maxSockets }),
  };
  let target: Promise<Target | null> | undefined;

  /** The bucket's URL and a signer for it, as the client's endpoint rules resolve them; null when not plain SigV4. */
  function resolve(): Promise<Target | null> {
    target ??= (async () => {
      const resolved = config.endpointProvider({
        Bucket: o.bucket,
        Region: o.region,
        UseFIPS: await config.useFipsEndpoint(),
        UseDualStack: await config.useDualstackEndpoint(),
        ...(o.endpoint ? { Endpoint: o.endpoint } : {}),
        ...(o.forcePathStyle ? { ForcePathStyle: true } : {}),
      });
      const schemes = (resolved.properties?.authSchemes ?? []) as Array<{
        name?: string;
        signingName?: string;
        signingRegion?: string;
      }>;
      const scheme = schemes[0];
      if (scheme?.name !== "sigv4" || Object.keys(resolved.headers ?? {}).length > 0) return null;
      return {
        url: new URL(resolved.url.toString()),
        signer: createGetSigner({
          service: scheme.signingName ?? "s3",
          region: scheme.signingRegion ?? o.region,
          credentials: () => config.credentials(),
        }),
      };
    })();
    return target;
  }

  async function attempt(t: Target, key: string): Promise<Buffer | null> {
    if (closed.signal.aborted) throw new StoreClosedError();
    const path = `${t.url.pathname.replace(/\/$/, "")}/${key.split("/").map(encodeKeySegment).join("/")}`;
    const port = t.url.port ? Number(t.url.port) : undefined;
    const headers = await t.signer.sign(t.url.host, path);
    const https = t.url.protocol === "https:";
    // One timer and one listener per request rather than AbortSignal.timeout and AbortSignal.any:
    // a thousand reads of a status command pay for each of those objects.
    return new Promise<Buffer | null>((resolveBody, reject) => {
      const fail = (error: Error) => {
        req.destroy();
        reject(error);
      };
      const onClose = () => fail(new StoreClosedError());
      const deadline = setTimeout(() => fail(new StoreDeadlineError(o.deadlineMs)), o.deadlineMs);
      const req = (https ? httpsRequest : httpRequest)(
        {
          agent: https ? agents.https : agents.http,
          method: "GET",
          hostname: t.url.hostname,
          port,
          path,
          headers,
          timeout: o.timeoutMs,
        },
        (res) => read(res, key).then(resolveBody, reject),
      );
      closed.signal.addEventListener("abort", onClose, { once: true });
      req.on("close", () => {
        clearTimeout(deadline);
        closed.signal.removeEventListener("abort", onClose);
      });
      req.on("timeout", () =>
        fail(Object.assign(new Error(`no byte for ${o.timeoutMs} ms`), { name: "TimeoutError" })),
      );
      req.on("error", reject);
      req.end();
    });
  }

  /** The body of a 200, null for a 404; an error that says the store's answer otherwise. */
  async function read(res: IncomingMessage, key: string): Promise<Buffer | null> {
    const status = res.statusCode ?? 0;
    const length = Number(res.headers["content-length"]);
    if (status === 200 && length > o.maxObjectBytes) {
      res.destroy();
      throw new ObjectTooLargeError(length, o.maxObjectBytes);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > o.maxObjectBytes) {
        res.destroy();
        throw new ObjectTooLargeError(null, o.maxObjectBytes);
      }
      chunks.push(chunk);
    }
    if (status === 200) return Buffer.concat(chunks, size);
    if (status === 404) return null;
    const text = Buffer.concat(chunks, size).toString("utf8");
    const code = /<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1];
    throw Object.assign(new Error(`HTTP ${status}${code ? ` ${code}` : ""} for ${key}`), {
      name: code ?? "HttpError",
      status,
    });
  }

  return {
    async get(key) {
      let t: Target | null;
      try {
        t = await resolve();
      } catch (error) {
        target = undefined;
        throw new StoreError(`S3 get of ${o.describe(key)} failed: ${errorText(error)}`, {
          transient: false,
          cause: error,
        });
      }
      if (t === null) return o.fallback(key);
      for (let tries = 1; ; tries++) {
        try {
          return await attempt(t, key);
        } catch (error) {
          // A store that refuses this path's request (its signature, a header it wants) may still
          // take the client's: the client reads from then on, so the lean path never costs a read.
          if (isRefusal(error)) {
            target = Promise.resolve(null);
            return o.fallback(key);
          }
          const transient = isTransient(error);
          if (!transient || tries >= 2 || closed.signal.aborted)
            throw new StoreError(`S3 get of ${o.describe(key)} failed: ${errorText(error)}`, {
              transient,
              cause: error,
            });
          await new Promise((r) => setTimeout(r, Math.random() * RETRY_BASE_MS));
        }
      }
    },
    close() {
      closed.abort();
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/** A key's path segment as S3 expects it: RFC 3986, which also escapes !'()*. */
function encodeKeySegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function isRefusal(error: unknown): boolean {
  const { status } = error as { status?: number };
  return status === 400 || status === 401 || status === 403;
}

function isTransient(error: unknown): boolean {
  if (error instanceof ObjectTooLargeError || error instanceof StoreClosedError) return false;
  if (error instanceof StoreDeadlineError) return true;
  const { code, name, status } = error as { code?: unknown; name?: unknown; status?: number };
  return (
    TRANSIENT_NETWORK_CODES.has(String(code)) ||
    name === "TimeoutError" ||
    name === "SlowDown" ||
    (status !== undefined && (status >= 500 || status === 429 || status === 408))
  );
}
