import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BodyTooLargeError, readBody } from "../../../shared/adapters/request-body.js";

let server: Server;
let url: string;

beforeAll(async () => {
  // Echoes the body it read, or answers 413 with the error's message.
  server = createServer((req, res) => {
    readBody(req, 16).then(
      (text) => res.writeHead(200, { "content-type": "text/plain" }).end(`read:${text}`),
      (err: unknown) =>
        res
          .writeHead(err instanceof BodyTooLargeError ? 413 : 500, { connection: "close" })
          .end((err as Error).message),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("readBody", () => {
  it("reads a body up to the limit as UTF-8 text", async () => {
    const res = await fetch(url, { method: "POST", body: "héllo, wörld" });
    expect(await res.text()).toBe("read:héllo, wörld");
  });

  it("stops past the limit and leaves the request answerable", async () => {
    const res = await fetch(url, { method: "POST", body: "x".repeat(64 * 1024) });
    expect(res.status).toBe(413);
    expect(await res.text()).toBe("body over 16 bytes");
  });
});
