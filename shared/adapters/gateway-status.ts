/*
 * Writes the status of Gateway API objects through their status subresource: a replace
 * (PUT …/status, client-node's credentials, sent as adapters/cluster.ts sends its reads; the
 * generated CustomObjectsApi would bring every model of the API into the function's bundle) that
 * names the resourceVersion it was computed from,
 * so that a write over a newer object is refused (409) rather than lost. On a conflict the object
 * is read again and the caller's merge runs on what it holds now, once; a 404 means the object
 * went, which is no failure. RBAC: update on httproutes/status, gateways/status and
 * gatewayclasses/status (infra/base/rbac.yaml).
 */

import type { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { ApiException } from "@kubernetes/client-node/dist/gen/apis/exception.js";
import { GATEWAY_GROUP } from "../core/gateway/schemas.js";
import { getRaw, putRaw } from "./kube-get.js";

export type StatusKind = "GatewayClass" | "Gateway" | "HTTPRoute";

const PLURAL: Record<StatusKind, string> = {
  GatewayClass: "gatewayclasses",
  Gateway: "gateways",
  HTTPRoute: "httproutes",
};
const VERSION = "v1";

/** An object whose status servicelb writes; `namespace` absent for the cluster-scoped GatewayClass. */
export interface StatusTarget {
  kind: StatusKind;
  namespace?: string;
  name: string;
}

/** What the object held when the status was computed from it. */
export interface HeldObject {
  resourceVersion: string | undefined;
  generation: number;
  status: unknown;
}

/**
 * written; unchanged (nothing to write, after a re-read too); gone (404); superseded (the spec
 * changed since: the pass its event starts writes); conflict (refused twice: the next pass writes).
 */
export type WriteOutcome = "written" | "unchanged" | "gone" | "superseded" | "conflict";

export interface StatusWriter {
  /**
   * Writes `merge(held status)` when it differs from the held status (`differs`), by the held
   * resourceVersion; on a conflict reads the object again and tries once more, unless its
   * generation moved past `held.generation` (the status would describe a spec it has not seen).
   */
  write(
    target: StatusTarget,
    held: HeldObject,
    merge: (status: unknown) => Record<string, unknown>,
    differs: (status: unknown, merged: Record<string, unknown>) => boolean,
    signal: AbortSignal,
  ): Promise<WriteOutcome>;
}

const codeOf = (err: unknown) => (err instanceof ApiException ? err.code : undefined);

export function createStatusWriter(kc: KubeConfig): StatusWriter {
  const pathOf = (t: StatusTarget) =>
    `/apis/${GATEWAY_GROUP}/${VERSION}/${t.namespace === undefined ? "" : `namespaces/${encodeURIComponent(t.namespace)}/`}${PLURAL[t.kind]}/${encodeURIComponent(t.name)}`;

  function replace(
    t: StatusTarget,
    resourceVersion: string | undefined,
    status: Record<string, unknown>,
    signal: AbortSignal,
  ) {
    const body = {
      apiVersion: `${GATEWAY_GROUP}/${VERSION}`,
      kind: t.kind,
      metadata: {
        name: t.name,
        ...(t.namespace !== undefined ? { namespace: t.namespace } : {}),
        ...(resourceVersion !== undefined ? { resourceVersion } : {}),
      },
      status,
    };
    return putRaw(kc, `${pathOf(t)}/status`, body, signal);
  }

  async function read(t: StatusTarget, signal: AbortSignal): Promise<HeldObject | null> {
    try {
      const obj = (await getRaw(kc, pathOf(t), {}, signal)) as {
        metadata?: { resourceVersion?: string; generation?: number };
        status?: unknown;
      };
      return {
        resourceVersion: obj.metadata?.resourceVersion,
        generation: obj.metadata?.generation ?? 0,
        status: obj.status,
      };
    } catch (err) {
      if (codeOf(err) === 404) return null;
      throw err;
    }
  }

  return {
    async write(target, held, merge, differs, signal) {
      let current = held;
      for (let attempt = 1; ; attempt++) {
        const merged = merge(current.status);
        if (!differs(current.status, merged)) return "unchanged";
        try {
          await replace(target, current.resourceVersion, merged, signal);
          return "written";
        } catch (err) {
          const code = codeOf(err);
          if (code === 404) return "gone";
          if (code !== 409) throw err;
          if (attempt === 2) return "conflict";
        }
        const fresh = await read(target, signal);
        if (fresh === null) return "gone";
        if (fresh.generation !== held.generation) return "superseded";
        current = fresh;
      }
    },
  };
}
