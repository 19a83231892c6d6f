/*
 * functions-framework 5 reads the request before the function runs: body-parser parses JSON and
 * text bodies, and for CloudEvent functions its middleware reshapes the body into an event. What
 * fails there (invalid JSON, `null`, an unsupported charset or encoding, a CloudEvent body that is
 * not an object) never reaches the function: Express's default final handler answers it with an
 * HTML page (with the stack trace unless NODE_ENV=production), 400 or 500. The framework offers no
 * hook for this (GoogleCloudPlatform/functions-framework-nodejs#686), so the final handler of the
 * Express apps in this process — the framework's is the only one — is replaced by an answer of
 * our own. A test sends each such request through the real framework, so an upgrade that changes
 * this is noticed.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";

export interface Rejection {
  /** 404 when no route matched (e.g. GET on a CloudEvent function); else the 4xx the request deserves. */
  status: number;
  /** Why, without internals: body-parser's own message for a body it refused, else a fixed text. */
  reason: string;
}

export type RejectionAnswer = (rejection: Rejection, req: IncomingMessage, res: ServerResponse) => void;

interface HttpError {
  status?: unknown;
  expose?: unknown;
  type?: unknown;
  message?: unknown;
}

interface ExpressApplication {
  handle(this: unknown, req: IncomingMessage, res: ServerResponse, callback?: (err?: unknown) => void): void;
}

const INSTALLED = Symbol.for("servicelb.frameworkRejections");
type Patched = ExpressApplication & { [INSTALLED]?: { answer: RejectionAnswer } };

export function describeRejection(err: unknown, req: IncomingMessage): Rejection {
  if (err === undefined || err === null)
    return { status: 404, reason: `nothing is served at ${req.method ?? "?"} ${req.url ?? "/"}` };
  const e = err as HttpError;
  // http-errors marks what is safe to show the client (body-parser's 4xx) with `expose`.
  if (
    e.expose === true &&
    typeof e.status === "number" &&
    e.status >= 400 &&
    e.status < 500 &&
    typeof e.message === "string"
  ) {
    const reason =
      e.type === "entity.parse.failed"
        ? `the body is not valid ${req.headers["content-type"] ?? "JSON"}: ${e.message}`
        : e.message;
    return { status: e.status, reason };
  }
  // The CloudEvent middleware throws on a body that is not an object (text, nothing at all): the
  // request's fault, whatever the exception says.
  return {
    status: 400,
    reason:
      "the request is not one functions-framework can hand to the function (a CloudEvent needs a JSON object body, or ce-* headers and JSON data)",
  };
}

/** Answers what functions-framework rejects before the function runs with `answer`. The last call wins. */
export function answerFrameworkRejections(answer: RejectionAnswer): void {
  // express is functions-framework's dependency, resolved from there so that it is the very copy it uses.
  const fromFramework = createRequire(createRequire(import.meta.url).resolve("@google-cloud/functions-framework"));
  const application = (fromFramework("express") as { application: Patched }).application;
  const installed = application[INSTALLED];
  if (installed) {
    installed.answer = answer;
    return;
  }
  const state = { answer };
  application[INSTALLED] = state;
  const handle = application.handle;
  application.handle = function (req, res, callback) {
    handle.call(
      this,
      req,
      res,
      callback ??
        ((err?: unknown) => {
          if (res.headersSent) {
            res.destroy();
            return;
          }
          // Drain what body-parser left unread, so that the connection can be reused.
          req.resume();
          state.answer(describeRejection(err, req), req, res);
        }),
    );
  };
}

/** The JSON error answer the HTTP functions give everywhere else: `{"error": "..."}`. */
export function answerJson(rejection: Rejection, _req: IncomingMessage, res: ServerResponse): void {
  const body = `${JSON.stringify({ error: rejection.reason })}\n`;
  res.statusCode = rejection.status;
  res.setHeader("content-type", "application/json");
  res.setHeader("content-length", Buffer.byteLength(body));
  res.end(body);
}
