/*
 * The server slots of the Gateway API's backends (`gw:<namespace>:<service>:<port>`,
 * core/gateway/render.ts), kept in the backend layout as a Service's own backend keeps its: a
 * backend starts with a free slot beyond its endpoints (slots.ts slotCount), keeps its count while
 * its endpoints fit with one free, and grows at runtime past it (`add server`: a Gateway backend
 * balances round robin, sets no cookie and checks no server). Its endpoints are hashed into the
 * slots (slots.ts assignSlots), so a pod added, replaced or removed is a change of server slots,
 * which the agent applies through the runtime API. The count shrinks with a fresh layout only,
 * which is a reload anyway.
 *
 * A backend no route reaches any more stays, every slot free (vacated), while the vacated ones
 * hold no more slots than the backends routes reach: a route removed, or pointed at another
 * backend, is then a change of map lines (core/gateway/render-maps.ts), and a route that reaches
 * it again takes it back as it was. Beyond that they all go, with the reload their sections'
 * removal costs; so does a fresh layout.
 *
 * Pure: the routing and the previous record in, the record and the routing in slots out.
 */

import { z } from "zod";
import { compareStrings } from "../compare.js";
import type { GatewayBackend, GatewayRouting } from "../gateway/routing.js";
import { assignSlots, slotCount, slotsFit } from "./slots.js";

const SLOTS = z
  .number()
  .int()
  .min(1)
  .max(1 << 16);

const NAME = "[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?";

export const gatewaySlotsSchema = z.array(
  z.object({
    /** gateway/backend-refs.ts gatewayBackendName: Kubernetes names and the Service port. */
    name: z.string().regex(new RegExp(`^gw:${NAME}:${NAME}:[1-9][0-9]{0,4}$`)),
    slots: SLOTS,
    /** The count its endpoints are hashed into when it grew at runtime (slots.ts assignSlots); absent: `slots`. */
    hashSlots: SLOTS.optional(),
  }),
);

/** Per Gateway backend, by name. */
export type GatewaySlots = z.infer<typeof gatewaySlotsSchema>;

function endpoints(b: GatewayBackend): string[] {
  const addresses: string[] = [];
  for (const address of b.servers) if (address !== null) addresses.push(address);
  return addresses.sort(compareStrings);
}

/**
 * The slots of each backend the routing reaches: those it had (`previous`) while its endpoints
 * fit, else as many as they need, hashed as before; a backend that had none starts with what
 * its endpoints need, at least `minSlots`. Then the vacated ones, as the module says. Sorted by name.
 */
export function keepGatewaySlots(
  routing: GatewayRouting,
  previous: GatewaySlots | undefined,
  minSlots: number,
): GatewaySlots {
  const had = new Map((previous ?? []).map((s) => [s.name, s]));
  const out: GatewaySlots = routing.backends.map((b) => {
    const count = endpoints(b).length;
    const before = had.get(b.name);
    if (!before) return { name: b.name, slots: slotCount(count, minSlots, true, true) };
    const hashSlots = before.hashSlots ?? before.slots;
    const slots = slotsFit(count, before.slots) ? before.slots : slotCount(count, minSlots, true, true);
    return hashSlots === slots ? { name: b.name, slots } : { name: b.name, slots, hashSlots };
  });
  const reached = new Set(out.map((s) => s.name));
  const vacated = (previous ?? []).filter((s) => !reached.has(s.name));
  const total = (list: GatewaySlots) => list.reduce((sum, s) => sum + s.slots, 0);
  if (total(vacated) <= total(out)) out.push(...vacated);
  return out.sort((a, b) => compareStrings(a.name, b.name));
}

/** A vacated backend, from its record: its name says which Service port it served. */
function vacatedBackend(s: GatewaySlots[number]): GatewayBackend {
  const [, namespace, service, port] = s.name.split(":") as [string, string, string, string];
  return { name: s.name, namespace, service, port: Number(port), servers: Array(s.slots).fill(null) };
}

/** The routing with each backend's endpoints in its slots (null: a free slot), the vacated ones among them. */
export function gatewayInSlots(routing: GatewayRouting, slots: GatewaySlots): GatewayRouting {
  const reached = new Map(routing.backends.map((b) => [b.name, b]));
  return {
    ...routing,
    backends: slots.map((s) => {
      const b = reached.get(s.name);
      return b ? { ...b, servers: assignSlots(endpoints(b), s.slots, s.hashSlots ?? s.slots) } : vacatedBackend(s);
    }),
  };
}
