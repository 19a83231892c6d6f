/*
 * Reading a request body on a node:http server with a size limit, for the servers servicelb runs
 * itself (the agent's API, the local stack's Kubernetes API emulator).
 */

import type { IncomingMessage } from "node:http";

export class BodyTooLargeError extends Error {
  override name = "BodyTooLargeError";
  constructor(readonly maxBytes: number) {
    super(`body over ${maxBytes} bytes`);
  }
}

/**
 * The body as UTF-8 text. Past `maxBytes` it stops buffering and rejects with BodyTooLargeError;
 * the request is paused, not destroyed, so that the caller can still answer it (413).
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        req.pause();
        reject(new BodyTooLargeError(maxBytes));
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
