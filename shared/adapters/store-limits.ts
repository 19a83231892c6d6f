/*
 * Bounds on what one S3 request may cost. The SDK's own timeouts are idle timeouts (connect,
 * and time between two socket events): a store that answers one byte every 2 s never trips
 * them, and one request could hold an agent's pull forever. So every request gets an overall
 * deadline, body included, and a body over a size cap is refused before it is read (from its
 * Content-Length) or as soon as it passes the cap (a body without one), never buffered whole.
 */

import { Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import { raceAbort } from "../core/deadline.js";

/** Far above a 10,000-Service config (~8 MB), far below the DaemonSet's memory limit. */
export const DEFAULT_MAX_OBJECT_BYTES = 64 * 1024 * 1024;

export interface StoreLimits {
  /** From sending a request to the last byte of its body. */
  deadlineMs: number;
  /** Largest object body read. */
  maxObjectBytes: number;
}

/** Named TimeoutError: the store classes it with the SDK's own timeouts, as transient. */
export class StoreDeadlineError extends Error {
  override readonly name = "TimeoutError";
  constructor(deadlineMs: number) {
    super(`no complete answer within ${deadlineMs} ms`);
  }
}

/** The store stopped serving requests (it was closed) while this one was in flight. */
export class StoreClosedError extends Error {
  override readonly name = "StoreClosed";
  constructor() {
    super("the store client was closed");
  }
}

/** Not transient: the same object stays too large. */
export class ObjectTooLargeError extends Error {
  override readonly name = "ObjectTooLarge";
  constructor(
    readonly bytes: number | null,
    readonly maxBytes: number,
  ) {
    super(
      bytes === null
        ? `the body passed the cap of ${maxBytes} bytes; refused`
        : `the object is ${bytes} bytes, over the cap of ${maxBytes} bytes; refused without reading it`,
    );
  }
}

type Send = (command: unknown, options?: { abortSignal?: AbortSignal }) => Promise<unknown>;

/**
 * Makes every `client.send` obey `limits`, and `client.destroy()` end the requests in flight
 * (the client is changed in place).
 * The abort signal goes to the SDK (which drops the connection), and the wait is raced against
 * it as well, so no step of the SDK that ignores the signal can outlast the deadline. A body
 * returned to the caller stays under the same deadline until it has been read.
 */
export function limitRequests(client: S3Client, limits: StoreLimits): void {
  const closed = new AbortController();
  const send = client.send.bind(client) as Send;
  const destroy = client.destroy.bind(client);
  const bounded: Send = async (command, options) => {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new StoreDeadlineError(limits.deadlineMs)), limits.deadlineMs);
    const signal = AbortSignal.any([
      deadline.signal,
      closed.signal,
      ...(options?.abortSignal ? [options.abortSignal] : []),
    ]);
    let output: { Body?: unknown; ContentLength?: number };
    try {
      output = (await raceAbort(
        send(command, { ...options, abortSignal: signal }),
        signal,
        () => signal.reason,
      )) as typeof output;
    } catch (err) {
      clearTimeout(timer);
      // The SDK reports its own abort as an AbortError: say which limit ended the request.
      throw signal.aborted ? (signal.reason as Error) : err;
    }
    const body = output.Body;
    if (!(body instanceof Readable)) {
      clearTimeout(timer);
      return output;
    }
    if (output.ContentLength !== undefined && output.ContentLength > limits.maxObjectBytes) {
      clearTimeout(timer);
      body.destroy();
      throw new ObjectTooLargeError(output.ContentLength, limits.maxObjectBytes);
    }
    const onAbort = () => body.destroy(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    body.once("close", () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    });
    return output;
  };
  // One cast: S3Client.send is overloaded (promise and callback forms); the store uses the promise form only.
  client.send = bounded as S3Client["send"];
  client.destroy = () => {
    closed.abort(new StoreClosedError());
    destroy();
  };
}

/**
 * An object body, read as a stream and refused once it passes `maxBytes` (for a store that sends
 * no Content-Length, or a wrong one): at most the cap is ever held in memory.
 */
export async function readBodyText(body: unknown, maxBytes: number): Promise<string> {
  return (await readBodyBytes(body, maxBytes)).toString("utf8");
}

/** The same as bytes: a config is verified on the bytes the store sent. */
export async function readBodyBytes(body: unknown, maxBytes: number): Promise<Buffer> {
  if (!(body instanceof Readable)) throw new Error("the store returned no body stream");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new ObjectTooLargeError(null, maxBytes);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}
