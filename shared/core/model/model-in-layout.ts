/*
 * A model laid out (backend-layout.ts decides the layout): named backends in the slots they keep,
 * the Services a spare holds moved into it with their routes, and the free spares and the
 * backends left behind by removed Services added with every slot free. What is built is kept in
 * the instance's LayoutState and reused by identity, as the renderer caches by identity.
 */

import type { Backend, HttpRoute, Model } from "./model.js";
import { compareStrings } from "../compare.js";
import { settingDefaults } from "./backend-settings.js";
import type { BackendLayout, LayoutState } from "./layout-record.js";
import { assignSlots, slotCookies } from "./slots.js";

function freeSlots(count: number): Array<string | null> {
  return assignSlots([], count);
}

function stripSegments(prefix: string): 1 | 2 {
  return prefix.split("/").length - 1 === 1 ? 1 : 2;
}

/** The addresses a backend's slots hold, sorted. */
export function endpointsOf(b: Backend): string[] {
  const addresses: string[] = [];
  for (const address of b.servers) if (address !== null) addresses.push(address);
  return addresses.sort(compareStrings);
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
export function modelInLayout(model: Model, layout: BackendLayout, state: LayoutState): Model {
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
