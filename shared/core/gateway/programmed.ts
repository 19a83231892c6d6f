/*
 * Programmed means the fleet runs it (docs/gateway-api.md#programmed): a Gateway, and each of its
 * listeners that can be served, is `Programmed=True` only once every node that reports to the
 * store runs the config that first held the Gateway as it is now, or a later one; until then
 * `Programmed=False` with reason `Pending`. Pure: which config that is (`since`) and what the
 * nodes run are the caller's to tell.
 */

import type { GatewayObjectStatus, GatewayStatus, RouteParentStatus } from "./status.js";

/** What the nodes' reports say of one config: every reporting node runs it or a later one, or why not. */
export type FleetRuns = { runs: true } | { runs: false; why: string };

/**
 * What a Gateway serves as it is now: its status other than Programmed, and the parents of the
 * routes that name it. The config a pass publishes (or shares) holds it; a later pass with the
 * same input needs no newer config for it.
 */
export function programmingInput(gateway: GatewayObjectStatus, routes: GatewayStatus["httpRoutes"]): string {
  const notProgrammed = (c: { type: string }) => c.type !== "Programmed";
  const names = (p: RouteParentStatus) =>
    p.parentRef.namespace === gateway.namespace && p.parentRef.name === gateway.name;
  return JSON.stringify([
    gateway.conditions.filter(notProgrammed),
    gateway.listeners.map((l) => [l.name, l.attachedRoutes, l.conditions.filter(notProgrammed)]),
    routes.flatMap((r) => r.parents.filter(names).map((p) => [r.namespace, r.name, p.conditions])),
  ]);
}

/**
 * The Gateway's status with its pending Programmed conditions (those of a Gateway or listener that
 * can be served) decided by `fleet` on config `since`.
 */
export function withProgrammed(gateway: GatewayObjectStatus, since: string, fleet: FleetRuns): GatewayObjectStatus {
  const decide = <C extends { type: string; reason: string; observedGeneration: number }>(c: C) =>
    c.type !== "Programmed" || c.reason !== "Pending"
      ? c
      : fleet.runs
        ? {
            ...c,
            status: "True" as const,
            reason: "Programmed",
            message: `every node that reports runs config ${since} or a later one`,
          }
        : {
            ...c,
            status: "False" as const,
            reason: "Pending",
            message: `waiting for every node to run config ${since} or a later one: ${fleet.why}`,
          };
  return {
    ...gateway,
    conditions: gateway.conditions.map(decide),
    listeners: gateway.listeners.map((l) => ({ ...l, conditions: l.conditions.map(decide) })),
  };
}
