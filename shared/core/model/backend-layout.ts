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
 * the newest config: layout-record.ts), which is what keeps a stateless function's placements
 * stable. This module decides the layout; model-in-layout.ts builds the model laid out in it.
 */

import type { Backend, Model } from "./model.js";
import { compareStrings } from "../compare.js";
import { settingDefaults } from "./backend-settings.js";
import { modelDescriptors } from "./descriptors.js";
import { type GatewaySlots, gatewayInSlots, keepGatewaySlots } from "./gateway-slots.js";
import { type BackendLayout, LayoutState, type VacatedBackend } from "./layout-record.js";
import { endpointsOf, modelInLayout } from "./model-in-layout.js";
import { growsAtRuntime, slotsFit } from "./slots.js";

export interface Placement {
  model: Model;
  layout: BackendLayout;
  /** Why the layout started afresh, or null when the previous one absorbed the change. */
  fresh: string | null;
  /** What the config asks of each node for its listeners and server slots (core/model/descriptors.ts). */
  descriptors: number;
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
    const placed = modelInLayout(model, result, state);
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
  const placed = modelInLayout(model, fresh, state);
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
  const kept = gateway
    ? keepGatewaySlots(
        gateway,
        placement.fresh === null ? placement.layout.gateway : undefined,
        spareFloor(model),
        model.options.spareBackends,
      )
    : [];
  const slots = kept.length > 0 ? kept : undefined;
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
