/*
 * How the emulator answers: a JSON body, and a failure as the API server's Status object (its
 * HTTP code, reason, message and details), which client-node turns into the errors servicelb reads.
 */
import type http from "node:http";

/** Answered as a Kubernetes Status object: the HTTP code, its reason and message. */
export class KubeStatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly extra: { details?: object; metadata?: object } = {},
  ) {
    super(message);
  }
}

export function notFound(): KubeStatusError {
  return new KubeStatusError(404, "NotFound", "the server could not find the requested resource", { details: {} });
}

export function methodNotAllowed(): KubeStatusError {
  return new KubeStatusError(
    405,
    "MethodNotAllowed",
    "the server does not allow this method on the requested resource",
  );
}

export function badRequest(message: string): KubeStatusError {
  return new KubeStatusError(400, "BadRequest", message);
}

export function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

/** Answers `thrown` as a Status; anything but a KubeStatusError is the server's own 500. */
export function answerFailure(res: http.ServerResponse, thrown: unknown): void {
  const err =
    thrown instanceof KubeStatusError
      ? thrown
      : new KubeStatusError(500, "InternalError", `Internal error occurred: ${String(thrown)}`);
  json(res, err.code, {
    kind: "Status",
    apiVersion: "v1",
    metadata: err.extra.metadata ?? {},
    status: "Failure",
    message: err.message,
    reason: err.reason,
    ...(err.extra.details ? { details: err.extra.details } : {}),
    code: err.code,
  });
}
