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
 * A fresh record also holds --spare-backends spares (`gw:spare:<n>`, --min-server-slots free
 * slots each), as the Services' layout does (backend-layout.ts): a Service port that routes start
 * to reach goes into the lowest free spare, under the spare's name (the routing's picks are
 * renamed to it), so that a route to a Service the config held no backend for is a change of map
 * lines and server slots. A spare whose Service no route reaches any more is free again. Only
 * with no spare left does a new backend get a section of its own, which is a reload.
 *
 * A backend of its own that no route reaches any more stays, every slot free (vacated), while
 * the vacated ones hold no more slots than the backends routes reach: a route removed, or pointed
 * at another backend, is then a change of map lines (core/gateway/render-maps.ts), and a route
 * that reaches it again takes it back as it was. Beyond that they all go, with the reload their
 * sections' removal costs; so does a fresh layout.
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

const BACKEND = `gw:${NAME}:${NAME}:[1-9][0-9]{0,4}`;
const SPARE_PREFIX = "gw:spare:";

export const gatewaySlotsSchema = z.array(
  z.object({
    /** gateway/backend-refs.ts gatewayBackendName (Kubernetes names and the Service port), or a spare's. */
    name: z.string().regex(new RegExp(`^(${BACKEND}|${SPARE_PREFIX}[1-9][0-9]{0,4})$`)),
    slots: SLOTS,
    /** The count its endpoints are hashed into when it grew at runtime (slots.ts assignSlots); absent: `slots`. */
    hashSlots: SLOTS.optional(),
    /** A spare's: the Gateway backend it serves; absent: free. */
    holds: z
      .string()
      .regex(new RegExp(`^${BACKEND}$`))
      .optional(),
  }),
);

/** Per Gateway backend, by name. */
export type GatewaySlots = z.infer<typeof gatewaySlotsSchema>;

function endpoints(b: GatewayBackend): string[] {
  const addresses: string[] = [];
  for (const address of b.servers) if (address !== null) addresses.push(address);
  return addresses.sort(compareStrings);
}

type SlotRecord = GatewaySlots[number];

const isSpare = (s: SlotRecord) => s.name.startsWith(SPARE_PREFIX);

/** `before`'s slots for `count` endpoints: kept while they fit, else as many as they need, hashed as before. */
function kept(before: SlotRecord, count: number, minSlots: number): { slots: number; hashSlots?: number } {
  const hashSlots = before.hashSlots ?? before.slots;
  const slots = slotsFit(count, before.slots) ? before.slots : slotCount(count, minSlots, true, true);
  return hashSlots === slots ? { slots } : { slots, hashSlots };
}

/**
 * The slots of each backend the routing reaches: its own or its spare's as they were
 * (`previous`), the lowest free spare's for one that had none, else what its endpoints need, at
 * least `minSlots`; then the free spares and the vacated backends, as the module says. A fresh
 * record (`previous` undefined) has `spares` free spares. None of it without frontends. Sorted by name.
 */
export function keepGatewaySlots(
  routing: GatewayRouting,
  previous: GatewaySlots | undefined,
  minSlots: number,
  spares: number,
): GatewaySlots {
  // No listener to route from: nothing to keep ready either.
  if (routing.frontends.length === 0) return [];
  const fresh = previous === undefined;
  const before: GatewaySlots =
    previous ?? Array.from({ length: spares }, (_, i) => ({ name: `${SPARE_PREFIX}${i + 1}`, slots: minSlots }));
  const own = new Map<string, SlotRecord>();
  const heldIn = new Map<string, SlotRecord>();
  for (const s of before) {
    if (!isSpare(s)) own.set(s.name, s);
    else if (s.holds !== undefined) heldIn.set(s.holds, s);
  }
  const reached = new Set(routing.backends.map((b) => b.name));
  // The spares a route may take, lowest number first. One whose Service routes left is free from
  // the next change on: the agent points the maps elsewhere only after the slots changed, and
  // another Service's endpoints in its slots would meanwhile answer the old route.
  const number = (s: SlotRecord) => Number(s.name.slice(SPARE_PREFIX.length));
  const free = before.filter((s) => isSpare(s) && s.holds === undefined).sort((a, b) => number(a) - number(b));
  const left = before.filter((s) => isSpare(s) && s.holds !== undefined && !reached.has(s.holds));
  const out: GatewaySlots = routing.backends.map((b) => {
    const count = endpoints(b).length;
    const had = own.get(b.name) ?? heldIn.get(b.name);
    if (had) return { name: had.name, ...kept(had, count, minSlots), ...(isSpare(had) ? { holds: b.name } : {}) };
    const spare = fresh ? undefined : free.shift();
    if (spare) return { name: spare.name, ...kept(spare, count, minSlots), holds: b.name };
    return { name: b.name, slots: slotCount(count, minSlots, true, true) };
  });
  free.push(...left);
  const total = (list: GatewaySlots) => list.reduce((sum, s) => sum + s.slots, 0);
  const vacated = before.filter((s) => !isSpare(s) && !reached.has(s.name));
  if (total(vacated) <= total(out)) out.push(...vacated);
  for (const s of free)
    out.push(
      s.hashSlots === undefined
        ? { name: s.name, slots: s.slots }
        : { name: s.name, slots: s.slots, hashSlots: s.hashSlots },
    );
  return out.sort((a, b) => compareStrings(a.name, b.name));
}

/** A backend no route reaches (vacated) or a free spare, every slot free. */
function emptyBackend(s: SlotRecord): GatewayBackend {
  const [, namespace = "", service = "", port = "0"] = isSpare(s) ? [] : s.name.split(":");
  return { name: s.name, namespace, service, port: Number(port), servers: Array(s.slots).fill(null) };
}

/**
 * The routing with each backend's endpoints in its slots (null: a free slot), under its spare's
 * name when a spare serves it (the rules' picks renamed with it), the free spares and vacated
 * backends among them.
 */
export function gatewayInSlots(routing: GatewayRouting, slots: GatewaySlots): GatewayRouting {
  const reached = new Map(routing.backends.map((b) => [b.name, b]));
  const renamed = new Map<string, string>();
  const backends = slots.map((s) => {
    const b = reached.get(s.holds ?? s.name);
    if (!b) return emptyBackend(s);
    if (s.holds !== undefined) renamed.set(b.name, s.name);
    return { ...b, name: s.name, servers: assignSlots(endpoints(b), s.slots, s.hashSlots ?? s.slots) };
  });
  if (renamed.size === 0) return { ...routing, backends };
  const frontends = routing.frontends.map((f) => ({
    ...f,
    rules: f.rules.map((r) => ({
      ...r,
      picks: r.picks.map((p) => {
        const to = p.backend === null ? undefined : renamed.get(p.backend);
        return to === undefined ? p : { ...p, backend: to };
      }),
    })),
  }));
  return { ...routing, frontends, backends };
}
