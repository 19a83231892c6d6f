/*
 * Which backend each Service port is served by, kept from one render to the next so that a
 * Service added or removed is a change of map lines and server slots, which the agent applies
 * through the runtime API, rather than a new backend section, which needs a reload.
 *
 * A config carries `spare_<n>` backends: plain HTTP backends with free slots whose path strip
 * is told by the route (haproxy-config/route-maps.ts), as many slots as the largest backend when they were
 * provisioned. A new Service port that a spare can serve — HTTP, no per-Service settings, the
 * default algorithm, no affinity, plain HTTP routes, no more endpoints than a spare has slots —
 * is placed into the lowest free spare, its endpoints hashed into the spare's slots; a removed one leaves its backend behind
 * with every slot free (vacated), or frees its spare. Anything a spare cannot absorb (a Service
 * that needs its own backend, no spare left, a held Service that outgrew its spare) starts a
 * fresh layout: every Service in a backend of its own name and a new set of free spares. So does
 * a layout that would cost the nodes descriptors for nothing: backends left behind holding more
 * slots than the spares do, or a config over the room the smallest node has (core/model/descriptors.ts),
 * or a backend that outgrew its slots and cannot grow at runtime (slots.ts growsAtRuntime: new
 * server lines are then a reload anyway, which a fresh layout uses to give every backend the
 * slots its endpoints give: those that kept more shrink then). A backend that can grow keeps its
 * place and gets the slots its endpoints give, appended to those it has (`add server`).
 * A node that cannot open a descriptor for every slot runs none of the config, and a removed
 * Service's backends must not keep it there after the Service is gone. The
 * config then differs in its backends anyway, which is a reload; that reload provisions the
 * spares. Correctness never rests on the layout: the agent compares configs and reloads for any
 * change outside slots and maps (agent/decide.ts). The layout only decides how often it must.
 *
 * Pure. The previous layout is an input (a warm instance's memory, or the record published with
 * the newest config), which is what keeps a stateless function's placements stable.
 */

import { z } from "zod";
import type { Backend, HttpRoute, Model } from "./model.js";
import { compareStrings } from "../compare.js";
import { settingDefaults } from "./backend-settings.js";
import { modelDescriptors } from "./descriptors.js";
import { sha256 } from "../publish/sha256.js";
import { assignSlots, growsAtRuntime, slotCookies, slotsFit } from "./slots.js";
import { gatewayInSlots, type GatewaySlots, gatewaySlotsSchema, keepGatewaySlots } from "./gateway-slots.js";

const BACKEND_NAME = z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,300}$/);
const SPARE_NAME = z.string().regex(/^spare_[1-9][0-9]{0,5}$/);
const hostMatchSchema = z.object({ name: z.string().max(253), wildcard: z.boolean() });

const vacatedSchema = z.object({
  name: BACKEND_NAME,
  namespace: z.string().max(63),
  service: z.string().max(63),
  servicePort: z.number().int().min(1).max(65535),
  slots: z
    .number()
    .int()
    .min(1)
    .max(1 << 16),
  strip: z.object({ prefix: z.string().max(300), unlessHost: hostMatchSchema.nullable() }).nullable(),
});

export const backendLayoutSchema = z.object({
  version: z.literal(1),
  /** Server slots of each spare. */
  spareSlots: z
    .number()
    .int()
    .min(1)
    .max(1 << 16),
  /** Backends named after the Service port they serve, sorted. */
  named: z.array(BACKEND_NAME),
  /**
   * The server slots of each of `named`, in its order. A backend keeps its slots while its
   * endpoints fit (slots.ts), so the count is the layout's to remember; absent in a record from
   * before, whose backends then take the count their endpoints give.
   */
  slots: z
    .array(
      z
        .number()
        .int()
        .min(1)
        .max(1 << 16),
    )
    .optional(),
  /**
   * The slot count each backend that grew at runtime hashes its endpoints into: its count when
   * the layout placed it (slots.ts assignSlots). Absent: its `slots`.
   */
  hashSlots: z
    .record(
      BACKEND_NAME,
      z
        .number()
        .int()
        .min(1)
        .max(1 << 16),
    )
    .optional(),
  /** The spares and the Service port each holds (by its own backend's name), in order. */
  spares: z.array(z.object({ name: SPARE_NAME, holds: BACKEND_NAME.nullable() })),
  /** Backends whose Service port is gone, kept with every slot free. */
  vacated: z.array(vacatedSchema),
  /**
   * The server slots of the Gateway API's backends (gateway-slots.ts), placed after the Services
   * (placeGateway); absent without any. An absorbed layout carries them on to that step.
   */
  gateway: gatewaySlotsSchema.optional(),
});

export type BackendLayout = z.infer<typeof backendLayoutSchema>;
export type VacatedBackend = z.infer<typeof vacatedSchema>;

/** 16 hex digits of the record's sha256: its name in the store. */
export function layoutDigest(layout: BackendLayout): string {
  return sha256(JSON.stringify(layout)).slice(0, 16);
}

/** What placement keeps between renders of one instance: the record, and objects reused by identity. */
export class LayoutState {
  layout: BackendLayout | null = null;
  /** A held Service's spare, by the canonical backend object it was made from (renderer caches by identity). */
  readonly heldAs = new WeakMap<Backend, Backend>();
  /** Free spares and vacated backends, by name, for as long as their options stay the same. */
  readonly freeBackends = new Map<string, Backend>();
  freeKey = "";
  /** Input and output of the last placement, reused while the input and the room are the same. */
  last:
    | { input: Model; layout: BackendLayout | null; output: Model; room: number | null; descriptors: number }
    | undefined;
  /** A named backend in the slots it keeps, by the canonical backend object (renderer caches by identity). */
  readonly keptAs = new WeakMap<Backend, { hashSlots: number; backend: Backend }>();
  /** The routes moved to spares, reused while routes and layout stay the same (the renderer caches the maps by identity). */
  moved: { input: readonly HttpRoute[]; layout: BackendLayout; output: HttpRoute[] } | undefined;
  /**
   * The descriptors the smallest node has for a config's listeners and server slots (its limit
   * less what HAProxy takes itself), as the agents report it; null when not known.
   */
  room: number | null = null;

  constructor(layout: BackendLayout | null = null) {
    this.layout = layout;
  }
}

export interface Placement {
  model: Model;
  layout: BackendLayout;
  /** Why the layout started afresh, or null when the previous one absorbed the change. */
  fresh: string | null;
  /** What the config asks of each node for its listeners and server slots (core/model/descriptors.ts). */
  descriptors: number;
}

function freeSlots(count: number): Array<string | null> {
  return assignSlots([], count);
}

function stripSegments(prefix: string): 1 | 2 {
  return prefix.split("/").length - 1 === 1 ? 1 : 2;
}

/**
 * Whether the backend has a spare's shape: HTTP, the default algorithm, no affinity, the default
 * settings, reached by plain HTTP routes, stripping at most two path segments.
 */
function plainHttp(b: Backend, model: Model, tlsBackends: ReadonlySet<string>): boolean {
  const defaults = settingDefaults(model.options).settings;
  return (
    b.mode === "http" &&
    b.algorithm === model.options.balanceAlgorithm &&
    b.affinity.kind === "none" &&
    JSON.stringify(b.settings) === JSON.stringify(defaults) &&
    !tlsBackends.has(b.name) &&
    (b.strip === null || b.strip.prefix.split("/").length - 1 <= 2)
  );
}

function endpointsOf(b: Backend): string[] {
  const addresses: string[] = [];
  for (const address of b.servers) if (address !== null) addresses.push(address);
  return addresses.sort(compareStrings);
}

/** Whether a spare of `slots` slots can serve this Service port: a spare's shape, and room for its endpoints. */
function spareCanServe(b: Backend, model: Model, slots: number, tlsBackends: ReadonlySet<string>): boolean {
  return plainHttp(b, model, tlsBackends) && endpointsOf(b).length <= slots;
}

/** A removed backend can stay, slots freed, when it can be rendered again from the record alone. */
function vacatable(b: Backend, model: Model, tlsBackends: ReadonlySet<string>): VacatedBackend | null {
  if (!plainHttp(b, model, tlsBackends)) return null;
  return {
    name: b.name,
    namespace: b.namespace,
    service: b.service,
    servicePort: b.servicePort,
    slots: b.servers.length,
    strip: b.strip ? { prefix: b.strip.prefix, unlessHost: b.strip.unlessHost } : null,
  };
}

/** A spare's slots at most: a Service with more endpoints gets a backend of its own. */
const MAX_SPARE_SLOTS = 64;

/**
 * Slots of the spares a fresh layout provisions: as many as the largest HTTP backend has (so a
 * new Service the size of those already there fits), at least --min-server-slots, at most
 * MAX_SPARE_SLOTS. An absorbed change keeps the spares' size: it changes with a reload only.
 */
export function spareSlotsFor(model: Model): number {
  const least = spareFloor(model);
  let most = least;
  for (const b of model.backends) if (b.mode === "http" && b.servers.length > most) most = b.servers.length;
  return Math.min(Math.max(least, most), Math.max(least, MAX_SPARE_SLOTS));
}

/** The fewest slots any backend has: --min-server-slots (1 with --forward-services). */
function spareFloor(model: Model): number {
  return model.options.forwardServices ? 1 : model.options.minServerSlots;
}

/** Spares need a backend that names no Service's files: global source lists give every backend its own. */
function sparesPossible(model: Model): boolean {
  const d = settingDefaults(model.options).settings;
  return d.allowSources === null && d.denySources === null;
}

/**
 * Places the model's backends (each under its Service port's own name, as service-plan.ts makes
 * them) into the previous layout when it can absorb the change, else into a fresh one.
 */
export function placeBackends(model: Model, state: LayoutState = new LayoutState()): Placement {
  const previous = state.layout;
  const last = state.last;
  if (last && last.input === model && last.layout === previous && last.room === state.room && previous !== null)
    return { model: last.output, layout: previous, fresh: null, descriptors: last.descriptors };
  const spares = sparesPossible(model) ? model.options.spareBackends : 0;
  const tls = new Set<string>();
  for (const r of model.httpRoutes) if (r.action !== "route") tls.add(r.backend);
  const result = !previous
    ? "no previous layout"
    : previous.spares.length !== spares
      ? `${spares} spare backends wanted, the layout has ${previous.spares.length}`
      : previous.spareSlots < spareFloor(model)
        ? `spares have ${previous.spareSlots} slots, fewer than --min-server-slots`
        : absorb(model, previous, tls, state);
  if (typeof result !== "string") {
    const placed = build(model, result, state);
    const descriptors = modelDescriptors(placed);
    const room = state.room;
    // Over the room the absorbed layout may be only for what it keeps (spares sized for a Service
    // gone, backends left behind): a fresh one sheds that. Over it anyway, the nodes refuse either.
    if (room === null || descriptors <= room) return remember(state, model, result, placed, null, descriptors);
    return placeFresh(
      model,
      spares,
      state,
      `the config would need ${descriptors} descriptors for its listeners and server slots, the smallest node has room for ${room}`,
    );
  }
  return placeFresh(model, spares, state, result);
}

function placeFresh(model: Model, spares: number, state: LayoutState, why: string): Placement {
  const fresh: BackendLayout = {
    version: 1,
    spareSlots: spareSlotsFor(model),
    named: model.backends.map((b) => b.name),
    slots: model.backends.map((b) => b.servers.length),
    spares: Array.from({ length: spares }, (_, i) => ({ name: `spare_${i + 1}`, holds: null })),
    vacated: [],
  };
  const placed = build(model, fresh, state);
  return remember(state, model, fresh, placed, why, modelDescriptors(placed));
}

function remember(
  state: LayoutState,
  input: Model,
  layout: BackendLayout,
  output: Model,
  fresh: string | null,
  descriptors: number,
): Placement {
  state.layout = layout;
  state.last = { input, layout, output, room: state.room, descriptors };
  return { model: output, layout, fresh, descriptors };
}

/**
 * The Gateway backends of `model` (the placed model with the Gateway API's routing,
 * gateway/attach.ts) in their slots (gateway-slots.ts): kept from the layout the placement
 * absorbed into, afresh with a fresh one; and the layout with their record. Apart from the
 * Services' placement, so that a render whose Services did not change reuses it whatever the
 * Gateway API objects do.
 */
export function placeGateway(placement: Placement, model: Model, state: LayoutState): Placement {
  const gateway = model.gateway;
  const slots =
    gateway && gateway.backends.length > 0
      ? keepGatewaySlots(gateway, placement.fresh === null ? placement.layout.gateway : undefined, spareFloor(model))
      : undefined;
  let layout = placement.layout;
  if (!sameGatewaySlots(layout.gateway, slots)) {
    const { gateway: _, ...rest } = layout;
    layout = slots ? { ...rest, gateway: slots } : rest;
    // The record the next placement starts from, and the one its reuse of this placement is keyed on.
    state.layout = layout;
    if (state.last) state.last.layout = layout;
  }
  const placed = gateway && slots ? { ...model, gateway: gatewayInSlots(gateway, slots) } : model;
  return { ...placement, model: placed, layout };
}

function sameGatewaySlots(a: GatewaySlots | undefined, b: GatewaySlots | undefined): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** The backend of that name in a list sorted by name. */
function findBackend(backends: readonly Backend[], name: string): Backend | undefined {
  let lo = 0;
  let hi = backends.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const c = compareStrings(backends[mid]!.name, name);
    if (c === 0) return backends[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return undefined;
}

/** The previous layout with this model's Services placed in it, or why it cannot hold them. */
function absorb(
  model: Model,
  previous: BackendLayout,
  tls: ReadonlySet<string>,
  state: LayoutState,
): BackendLayout | string {
  const slots = previous.spareSlots;
  const heldIn = new Map<string, string>();
  for (const s of previous.spares) if (s.holds !== null) heldIn.set(s.holds, s.name);
  const vacated = new Map(previous.vacated.map((v) => [v.name, v]));
  const spares = previous.spares.map((s) => ({ ...s }));
  const named: string[] = [];
  const namedSlots: number[] = [];
  const hashSlots: Record<string, number> = {};
  const removed: string[] = [];
  const canonical = model.backends;
  const prev = previous.named;
  let j = 0;
  for (const b of canonical) {
    while (j < prev.length && compareStrings(prev[j]!, b.name) < 0) removed.push(prev[j++]!);
    if (j < prev.length && prev[j] === b.name) {
      const had = previous.slots?.[j];
      const kept = keptSlots(b, had, model);
      const hashed = previous.hashSlots?.[b.name] ?? had;
      if (had !== undefined && kept !== had) {
        // Outgrown, and no runtime growth: more server lines is a reload, which a fresh layout makes the most of.
        if (!growsAtRuntime(b.algorithm, b.affinity.kind, b.settings.check))
          return `${b.name} outgrew its ${had} server slots`;
        hashSlots[b.name] = hashed!;
      } else if (hashed !== undefined && hashed !== kept) hashSlots[b.name] = hashed;
      named.push(b.name);
      namedSlots.push(kept);
      j++;
      continue;
    }
    const spare = heldIn.get(b.name);
    if (spare !== undefined) {
      if (!spareCanServe(b, model, slots, tls)) return `${b.name} outgrew ${spare}`;
      heldIn.delete(b.name);
      continue;
    }
    const v = vacated.get(b.name);
    if (v !== undefined) {
      const slotsAgain = keptSlots(b, v.slots, model);
      const again = vacatable(b, model, tls);
      if (!again || JSON.stringify({ ...again, slots: slotsAgain }) !== JSON.stringify(v))
        return `${b.name} came back other than it left`;
      vacated.delete(b.name);
      named.push(b.name);
      namedSlots.push(slotsAgain);
      continue;
    }
    if (!spareCanServe(b, model, slots, tls)) return `${b.name} needs a backend of its own`;
    const free = spares.find((s) => s.holds === null);
    if (!free) return `no spare backend left for ${b.name}`;
    free.holds = b.name;
  }
  while (j < prev.length) removed.push(prev[j++]!);
  // Spares whose Service is gone are free again.
  for (const name of heldIn.keys()) spares.find((s) => s.holds === name)!.holds = null;
  for (const name of removed) {
    // A warm instance's last output (in the slots it kept); a cold one has none, and starts afresh.
    const before = state.last ? findBackend(state.last.output.backends, name) : undefined;
    const v = before ? vacatable(before, model, tls) : null;
    if (!v) return `${name} was removed and cannot stay behind empty`;
    vacated.set(name, v);
  }
  // What is left behind costs a descriptor a slot like the spares: no more of them than the
  // spares have, so that neither many removals nor one large one pin the nodes' descriptors.
  let left = 0;
  for (const v of vacated.values()) left += v.slots;
  if (left > spares.length * slots)
    return `backends left behind by removed Services would hold ${left} server slots, more than the ${spares.length * slots} of the spares`;
  return {
    version: 1,
    spareSlots: slots,
    named,
    slots: namedSlots,
    ...(Object.keys(hashSlots).length > 0 ? { hashSlots } : {}),
    spares,
    vacated: [...vacated.values()].sort((a, b) => compareStrings(a.name, b.name)),
    ...(previous.gateway ? { gateway: previous.gateway } : {}),
  };
}

/**
 * The slots a named backend keeps: those it had while its endpoints fit in them with one free
 * (slots.ts), however many fewer endpoints it now has, so that neither a rollout's surge nor its
 * end changes a slot count; else the count its endpoints give. Counts shrink with a fresh
 * layout only, a reload that happens anyway.
 */
function keptSlots(b: Backend, had: number | undefined, model: Model): number {
  if (had === undefined || model.options.forwardServices) return b.servers.length;
  let endpoints = 0;
  for (const address of b.servers) if (address !== null) endpoints++;
  return slotsFit(endpoints, had) ? had : b.servers.length;
}

/** The backend in `count` slots: its endpoints hashed into the first `hashSlots` of them (slots.ts assignSlots). */
function inSlots(b: Backend, count: number, hashSlots: number, state: LayoutState): Backend {
  if (b.servers.length === count && hashSlots === count) return b;
  const kept = state.keptAs.get(b);
  if (kept && kept.backend.servers.length === count && kept.hashSlots === hashSlots) return kept.backend;
  const servers = assignSlots(endpointsOf(b), count, hashSlots);
  const backend = { ...b, servers, cookies: b.cookies === null ? null : slotCookies(servers) };
  state.keptAs.set(b, { hashSlots, backend });
  return backend;
}

/**
 * The model with named backends in the slots they keep, held Services moved into their spares,
 * and the free spares and vacated backends added.
 */
function build(model: Model, layout: BackendLayout, state: LayoutState): Model {
  const slots = layout.spareSlots;
  const key = `${model.options.balanceAlgorithm} ${slots} ${JSON.stringify(settingDefaults(model.options).settings)}`;
  if (state.freeKey !== key) {
    state.freeBackends.clear();
    state.freeKey = key;
  }
  const settings = settingDefaults(model.options).settings;
  const used = new Set<string>();
  const free = (name: string, make: () => Backend): Backend => {
    used.add(name);
    let b = state.freeBackends.get(name);
    if (!b) {
      b = make();
      state.freeBackends.set(name, b);
    }
    return b;
  };
  const spareOf = new Map<string, string>();
  for (const s of layout.spares) if (s.holds !== null) spareOf.set(s.holds, s.name);
  const extras: Backend[] = [];
  const held = new Map<string, { canonical: Backend; moved: Backend }>();
  for (const b of model.backends) {
    const spare = spareOf.get(b.name);
    if (spare === undefined) continue;
    let moved = state.heldAs.get(b);
    if (!moved || moved.name !== spare || moved.servers.length !== slots) {
      // The spare's own slot count: its endpoints hashed into that many slots, as a backend of that size does.
      const servers = assignSlots(endpointsOf(b), slots);
      moved = {
        ...b,
        name: spare,
        namespace: "",
        service: "",
        servicePort: 0,
        strip: null,
        servers,
        stripByRoute: true,
        carries: { namespace: b.namespace, service: b.service, port: b.servicePort },
      };
      state.heldAs.set(b, moved);
    }
    held.set(b.name, { canonical: b, moved });
    extras.push(moved);
  }
  for (const s of layout.spares) {
    if (s.holds !== null) continue;
    extras.push(
      free(s.name, () => ({
        name: s.name,
        namespace: "",
        service: "",
        servicePort: 0,
        mode: "http",
        algorithm: model.options.balanceAlgorithm,
        affinity: { kind: "none" },
        servers: freeSlots(slots),
        cookies: null,
        strip: null,
        settings,
        stripByRoute: true,
        carries: null,
      })),
    );
  }
  for (const v of layout.vacated) {
    extras.push(
      free(`${v.name} ${JSON.stringify(v)}`, () => ({
        name: v.name,
        namespace: v.namespace,
        service: v.service,
        servicePort: v.servicePort,
        mode: "http",
        algorithm: model.options.balanceAlgorithm,
        affinity: { kind: "none" },
        servers: freeSlots(v.slots),
        cookies: null,
        strip: v.strip,
        settings,
        carries: null,
      })),
    );
  }
  // Backends of Services gone long ago, or of spares a fresh layout renamed, are not kept.
  if (state.freeBackends.size > used.size)
    for (const name of state.freeBackends.keys()) if (!used.has(name)) state.freeBackends.delete(name);
  // The slots each named backend keeps, from `slots` in `named`'s order (both sorted by name).
  let resized = false;
  let at = 0;
  const own = model.backends.map((b) => {
    if (!layout.slots) return b;
    while (at < layout.named.length && compareStrings(layout.named[at]!, b.name) < 0) at++;
    if (layout.named[at] !== b.name) return b;
    const count = layout.slots[at]!;
    const kept = inSlots(b, count, layout.hashSlots?.[b.name] ?? count, state);
    if (kept !== b) resized = true;
    return kept;
  });
  if (extras.length === 0 && !resized) return model;
  extras.sort((a, b) => compareStrings(a.name, b.name));
  const backends: Backend[] = [];
  let k = 0;
  for (const b of own) {
    if (held.has(b.name)) continue;
    while (k < extras.length && compareStrings(extras[k]!.name, b.name) < 0) backends.push(extras[k++]!);
    backends.push(b);
  }
  while (k < extras.length) backends.push(extras[k++]!);
  let httpRoutes = model.httpRoutes;
  if (held.size > 0) {
    const m = state.moved;
    if (m && m.input === model.httpRoutes && sameHolds(m.layout, layout)) httpRoutes = m.output;
    else {
      httpRoutes = model.httpRoutes.map((r) => movedRoute(r, held));
      state.moved = { input: model.httpRoutes, layout, output: httpRoutes };
    }
  }
  return { ...model, backends, httpRoutes };
}

function sameHolds(a: BackendLayout, b: BackendLayout): boolean {
  return a === b || (a.spares.length === b.spares.length && a.spares.every((s, i) => s.holds === b.spares[i]!.holds));
}

/** A held Service's route, to its spare; its own path tells the spare how many segments to strip. */
function movedRoute(r: HttpRoute, held: ReadonlyMap<string, { canonical: Backend; moved: Backend }>): HttpRoute {
  const h = held.get(r.backend);
  if (!h) return r;
  const own = h.canonical.strip;
  const strips = own !== null && r.match.kind === "path" && r.match.prefix === own.prefix;
  return strips
    ? { ...r, backend: h.moved.name, stripSegments: stripSegments(own.prefix) }
    : { ...r, backend: h.moved.name };
}
