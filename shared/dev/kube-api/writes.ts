/*
 * Writes as kubectl sends them: POST to a namespaced collection creates (409 when the object
 * exists), PUT to an object replaces it (404 when it does not exist; 409 when the body names a
 * resourceVersion that is no longer current), DELETE removes it; PUT to `…/status` writes only the
 * status of a kind that has the subresource. Each write is one revision and one watch event.
 */
import { errorMessage } from "../../core/error-message.js";
import { groupResource, KINDS, type KubeObject } from "./kinds.js";
import type { Route } from "./paths.js";
import type { Revisions } from "./revisions.js";
import { badRequest, KubeStatusError, methodNotAllowed, notFound } from "./status-error.js";

export type WriteMethod = "POST" | "PUT" | "DELETE";

/** The answer to a write: its HTTP status and JSON body. */
export interface WriteAnswer {
  status: number;
  body: unknown;
}

export function applyWrite(revisions: Revisions, route: Route, method: WriteMethod, body: string): WriteAnswer {
  if (route.namespace === undefined && !KINDS[route.kind].cluster) throw notFound();
  const { resource } = KINDS[route.kind];
  if (route.status && method !== "PUT") throw methodNotAllowed();
  const verb = method === "POST" ? "create" : method === "PUT" ? "update" : "delete";
  if ((verb === "create") !== (route.name === undefined)) throw methodNotAllowed();
  const missing = (name: string) =>
    new KubeStatusError(404, "NotFound", `${groupResource(route.kind)} "${name}" not found`, {
      details: { name, kind: resource },
    });
  if (verb === "delete") {
    const existing = revisions.stored(route.kind, route.namespace, route.name!);
    if (!existing) throw missing(route.name!);
    revisions.remove(route.kind, route.namespace, route.name!);
    return {
      status: 200,
      body: {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Success",
        details: { name: route.name, kind: resource, uid: existing.metadata.uid },
      },
    };
  }
  const obj = parseObject(route, body);
  const name = obj.metadata.name;
  const existing = revisions.stored(route.kind, route.namespace, name);
  if (verb === "create" && existing)
    throw new KubeStatusError(409, "AlreadyExists", `${groupResource(route.kind)} "${name}" already exists`, {
      details: { name, kind: resource },
    });
  if (verb === "update") {
    if (!existing) throw missing(name);
    const rv = obj.metadata.resourceVersion;
    if (rv !== undefined && rv !== "" && rv !== existing.metadata.resourceVersion) {
      throw new KubeStatusError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${groupResource(route.kind)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { details: { name, kind: resource } },
      );
    }
  }
  const { resourceVersion: _rv, generation: _generation, ...metadata } = obj.metadata;
  // With a status subresource, a write to the object keeps its status and one to `/status` changes only that.
  const written: KubeObject = !KINDS[route.kind].status
    ? obj
    : route.status
      ? { ...existing!, status: obj.status }
      : { ...obj, status: existing?.status };
  if (written.status === undefined) delete written.status;
  const stored = revisions.upsert(route.kind, {
    ...written,
    metadata: {
      ...(route.status ? existing!.metadata : metadata),
      ...(route.namespace !== undefined ? { namespace: route.namespace } : {}),
    },
  });
  return { status: verb === "create" ? 201 : 200, body: stored };
}

/** The body of a create or update, checked against its path as the API server checks it. */
function parseObject(route: Route, body: string): KubeObject {
  let obj: KubeObject;
  try {
    obj = JSON.parse(body) as KubeObject;
  } catch (err) {
    throw badRequest(`the body of the request was in an unknown format: ${errorMessage(err)}`);
  }
  const name = obj?.metadata?.name;
  if (typeof name !== "string" || name === "")
    throw new KubeStatusError(
      422,
      "Invalid",
      `${route.kind} is invalid: metadata.name: Required value: name is required`,
    );
  if (obj.kind !== undefined && obj.kind !== route.kind)
    throw badRequest(`the object's kind ${String(obj.kind)} does not match the path (${route.kind})`);
  if (
    obj.metadata.namespace !== undefined &&
    route.namespace !== undefined &&
    obj.metadata.namespace !== route.namespace
  )
    throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
  if (route.name !== undefined && route.name !== name)
    throw badRequest(`the name of the object (${name}) does not match the name on the URL (${route.name})`);
  return obj;
}
