/*
 * The status servicelb writes on a Gateway API object, merged into the status the object holds,
 * as a pure value: whoever writes compares the result with what the object has and writes only
 * when they differ, so that a pass that changes nothing writes nothing.
 *
 * - A condition whose status did not change keeps its `lastTransitionTime`; one that changed (or
 *   is new) takes `now`.
 * - HTTPRoute `status.parents[]`: the entries of other controllers are kept as they are, in their
 *   place; servicelb's own (controllerName `servicelb.io/gateway-controller`) are replaced by the
 *   desired ones, and removed when none is desired (a route detached from servicelb's Gateways).
 * - Gateway and GatewayClass: the object's controller is servicelb, so its conditions and listeners
 *   are servicelb's; other status fields (addresses) are kept.
 *
 * What an object holds is read leniently (statusSchema): a status another writer mangled is
 * replaced, never a reason to fail.
 */

import { z } from "zod";
import type { Condition, GatewayClassStatus, GatewayObjectStatus, RouteParentStatus } from "./status.js";
import { CONTROLLER_NAME } from "./status.js";

/** A condition as stored on an object. */
export interface StoredCondition extends Condition {
  lastTransitionTime: string;
}

const storedCondition = z.object({
  type: z.string(),
  status: z.string(),
  lastTransitionTime: z.string(),
});
const conditions = z
  .array(z.unknown())
  .catch([])
  .transform((list) =>
    list.flatMap((c) => {
      const parsed = storedCondition.safeParse(c);
      return parsed.success ? [parsed.data] : [];
    }),
  );
const parentEntry = z.object({ controllerName: z.string().catch(""), parentRef: z.unknown() }).passthrough();
const statusSchema = z
  .object({
    conditions: conditions.optional(),
    parents: z.array(z.unknown()).catch([]).optional(),
    listeners: z
      .array(z.object({ name: z.string(), conditions }).passthrough())
      .catch([])
      .optional(),
  })
  .passthrough()
  .catch({});

/** The status an object holds, as a plain record (an absent or malformed one is empty). */
export function readStatus(status: unknown): Record<string, unknown> {
  return status !== null && typeof status === "object" && !Array.isArray(status)
    ? (status as Record<string, unknown>)
    : {};
}

/** `desired` with each condition's lastTransitionTime: kept from `held` when its status is the same. */
export function mergeConditions(held: unknown, desired: readonly Condition[], now: string): StoredCondition[] {
  const before = conditions.parse(held ?? []);
  return desired.map((c) => {
    const prev = before.find((b) => b.type === c.type);
    return { ...c, lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : now };
  });
}

const refKey = (ref: unknown): string => {
  const r = (ref ?? {}) as Record<string, unknown>;
  return JSON.stringify([
    r.group ?? "gateway.networking.k8s.io",
    r.kind ?? "Gateway",
    r.namespace ?? "",
    r.name ?? "",
    r.sectionName ?? "",
    r.port ?? "",
  ]);
};

/**
 * An HTTPRoute's status with servicelb's parents set to `desired` (empty: none of servicelb's).
 * `namespace`: the route's, which a stored parentRef may leave out.
 */
export function mergeRouteStatus(
  held: unknown,
  desired: readonly RouteParentStatus[],
  namespace: string,
  now: string,
): Record<string, unknown> {
  const status = readStatus(held);
  const parents = statusSchema.parse(status).parents ?? [];
  const withNamespace = (ref: unknown) => ({ namespace, ...(ref as object) });
  const ours = new Map<string, Record<string, unknown>>();
  const others: unknown[] = [];
  for (const p of parents) {
    const entry = parentEntry.safeParse(p);
    if (entry.success && entry.data.controllerName === CONTROLLER_NAME)
      ours.set(refKey(withNamespace(entry.data.parentRef)), entry.data);
    else others.push(p);
  }
  if (ours.size === 0 && desired.length === 0) return status;
  const mine = desired.map((d) => ({
    parentRef: d.parentRef,
    controllerName: d.controllerName,
    conditions: mergeConditions(ours.get(refKey(d.parentRef))?.conditions, d.conditions, now),
  }));
  return { ...status, parents: [...others, ...mine] };
}

/** A Gateway's status: its conditions and listeners servicelb's, anything else kept. */
export function mergeGatewayStatus(held: unknown, desired: GatewayObjectStatus, now: string): Record<string, unknown> {
  const status = readStatus(held);
  const parsed = statusSchema.parse(status);
  return {
    ...status,
    conditions: mergeConditions(parsed.conditions, desired.conditions, now),
    listeners: desired.listeners.map((l) => ({
      name: l.name,
      supportedKinds: l.supportedKinds,
      attachedRoutes: l.attachedRoutes,
      conditions: mergeConditions(parsed.listeners?.find((h) => h.name === l.name)?.conditions, l.conditions, now),
    })),
  };
}

/** A GatewayClass's status: its conditions servicelb's. */
export function mergeClassStatus(held: unknown, desired: GatewayClassStatus, now: string): Record<string, unknown> {
  const status = readStatus(held);
  return { ...status, conditions: mergeConditions(statusSchema.parse(status).conditions, desired.conditions, now) };
}

/** JSON with every object's keys sorted: the API server may hand fields back in any order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object")
    return `{${Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(value) ?? "null";
}

/** Whether writing `merged` would change what the object holds. */
export function statusDiffers(held: unknown, merged: Record<string, unknown>): boolean {
  return canonical(readStatus(held)) !== canonical(merged);
}
