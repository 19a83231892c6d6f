/*
 * Orders the slot changes of an endpoint-only config change into runtime API commands that
 * never leave a backend with fewer ready servers than min(ready before, ready after), at any
 * instant: make before break. Pure: slot changes in, commands out.
 *
 * Per backend, in this order:
 * 0. add: a server line the backend gained (it grew, core/model/slots.ts) is added in maintenance with
 *    its address (`add server`, HAProxy 2.6: a new server starts in maintenance), and readied
 *    with the ups when it carries an endpoint;
 * 1. up: a free slot gets its new address while still in maintenance, then goes ready (a
 *    server leaving maintenance starts UP at once on 2.6, with no stale health from its old
 *    address);
 * 2. move (a serving slot gets another address; the only endpoint moving in place is the
 *    case that matters): a spare slot, free before and after, carries the new address first;
 *    only then is the old address drained and taken down, the slot re-addressed and readied;
 *    then the spare is drained, taken down and put back to its own address. No spare, but a slot
 *    that comes up or goes down in the same change (a pod replaced, its neighbours shifted by
 *    placement, core/model/slots.ts): each moving slot in turn is drained, taken down,
 *    re-addressed and readied, a slot giving up an address only after the one taking it over has
 *    it. Neither: reload instead (a reload of the same change drops nothing);
 * 3. down: drain (no new requests; in-flight ones finish, HAProxy does not cut a server's
 *    sessions when it enters maintenance), maintenance, then the config's placeholder address.
 * A slot free before and after whose placeholder changed only gets its address.
 *
 * The result is exactly the new config's slots, so a later reload, `show servers state` or
 * diff sees the file's state and nothing else.
 */

import type { ServerAdd, ServerChange, SlotState, SpareSlot } from "./diff.js";
import { hostPort } from "./server-line.js";
import { entryOf } from "../render/map-entry.js";

export type RuntimeCommand =
  | { op: "add"; backend: string; server: string; address: string; port: number; params: string }
  | { op: "addr"; backend: string; server: string; address: string; port: number }
  | { op: "state"; backend: string; server: string; state: "ready" | "drain" | "maint" };

export type RuntimePlan = { kind: "runtime"; commands: RuntimeCommand[] } | { kind: "reload"; reason: string };

/** The runtime API command line, as HAProxy 2.6's stats socket takes it. */
export function commandText(c: RuntimeCommand): string {
  if (c.op === "add")
    return `add server ${c.backend}/${c.server} ${hostPort(c.address, c.port)}${c.params === "" ? "" : ` ${c.params}`}`;
  return c.op === "addr"
    ? `set server ${c.backend}/${c.server} addr ${c.address} port ${c.port}`
    : `set server ${c.backend}/${c.server} state ${c.state}`;
}

const sameAddress = (a: SlotState, b: SlotState) => a.address === b.address && a.port === b.port;

export function planRuntime(
  changes: readonly ServerChange[],
  spare: ReadonlyMap<string, readonly SpareSlot[]>,
  adds: readonly ServerAdd[] = [],
): RuntimePlan {
  const byBackend = new Map<string, ServerChange[]>();
  const addsOf = new Map<string, ServerAdd[]>();
  for (const c of adds) {
    entryOf(addsOf, c.backend, () => []).push(c);
    entryOf(byBackend, c.backend, () => []);
  }
  for (const c of changes) entryOf(byBackend, c.backend, () => []).push(c);
  const commands: RuntimeCommand[] = [];
  for (const [backend, list] of byBackend) {
    const addr = (server: string, s: SlotState): RuntimeCommand => ({
      op: "addr",
      backend,
      server,
      address: s.address,
      port: s.port,
    });
    const state = (server: string, st: "ready" | "drain" | "maint"): RuntimeCommand => ({
      op: "state",
      backend,
      server,
      state: st,
    });
    const ups = list.filter((c) => !c.from.enabled && c.to.enabled);
    const moves = list.filter((c) => c.from.enabled && c.to.enabled && !sameAddress(c.from, c.to));
    const downs = list.filter((c) => c.from.enabled && !c.to.enabled);
    const quiet = list.filter((c) => !c.from.enabled && !c.to.enabled);
    const added = addsOf.get(backend) ?? [];
    // Every new server and address first, then every slot ready: two lines of the CLI (see runtimeLines).
    for (const c of added)
      commands.push({ op: "add", backend, server: c.server, address: c.to.address, port: c.to.port, params: c.params });
    for (const c of ups) if (!sameAddress(c.from, c.to)) commands.push(addr(c.server, c.to));
    for (const c of added) if (c.to.enabled) commands.push(state(c.server, "ready"));
    for (const c of ups) commands.push(state(c.server, "ready"));
    const bridge = spare.get(backend)?.[0];
    if (moves.length > 0 && !bridge) {
      // A slot that comes up (done above) or goes down (below) leaves room for one slot at a
      // time to be out of service while it is re-addressed: min(ready before, ready after) is
      // below what is ready then. Only a reshuffle of exactly as many endpoints needs a spare.
      if (ups.length === 0 && downs.length === 0) {
        const m = moves[0]!;
        return {
          kind: "reload",
          reason: `${backend}/${m.server} moves from ${show(m.from)} to ${show(m.to)} and the backend has no free slot to carry the new address meanwhile`,
        };
      }
      for (const c of carriedFirst(moves))
        commands.push(
          state(c.server, "drain"),
          state(c.server, "maint"),
          addr(c.server, c.to),
          state(c.server, "ready"),
        );
    } else if (moves.length > 0 && bridge) {
      for (const c of moves) {
        commands.push(
          addr(bridge.server, c.to),
          state(bridge.server, "ready"),
          state(c.server, "drain"),
          state(c.server, "maint"),
          addr(c.server, c.to),
          state(c.server, "ready"),
          state(bridge.server, "drain"),
          state(bridge.server, "maint"),
          addr(bridge.server, bridge),
        );
      }
    }
    for (const c of downs) commands.push(state(c.server, "drain"), state(c.server, "maint"));
    for (const c of downs) if (!sameAddress(c.from, c.to)) commands.push(addr(c.server, c.to));
    for (const c of quiet) if (!sameAddress(c.from, c.to)) commands.push(addr(c.server, c.to));
  }
  return { kind: "runtime", commands };
}

/**
 * The plan's commands as lines of HAProxy's CLI (`;`-separated commands, one connection each), in
 * order; a line goes out only once every command before it took effect. The CLI runs the rest of
 * a line after a refused command, so a line never holds a command whose safety rests on another
 * command of the same line:
 * - a `ready` on a slot that line re-addresses or adds (refused, the slot would serve its old
 *   address, or does not exist);
 * - a `drain` or `maint` after a `ready` (refused, capacity would go before it came);
 * - an `addr` on a slot that line takes out of service or puts in (refused, the slot may still
 *   serve, or serve the old address).
 * Everything else shares a line: a change's new addresses, then its readies, then its drains
 * and maintenances, then its placeholders; four round trips where a connection per command took
 * one per command.
 */
export function runtimeLines(commands: readonly RuntimeCommand[]): RuntimeCommand[][] {
  const lines: RuntimeCommand[][] = [];
  let line: RuntimeCommand[] = [];
  const sameSlot = (a: RuntimeCommand, b: RuntimeCommand) => a.backend === b.backend && a.server === b.server;
  for (const c of commands) {
    const restsOnLine = line.some((d) =>
      c.op !== "state"
        ? d.op === "state" && sameSlot(c, d)
        : c.state === "ready"
          ? d.op !== "state" && sameSlot(c, d)
          : d.op === "state" && d.state === "ready",
    );
    if (restsOnLine) {
      lines.push(line);
      line = [];
    }
    line.push(c);
  }
  if (line.length > 0) lines.push(line);
  return lines;
}

/**
 * Moves in an order where a slot gives up its address only after the slot that takes that
 * address over has it (when one does), so that an endpoint that stays is served throughout
 * wherever the moves form a chain; a cycle is cut anywhere.
 */
function carriedFirst(moves: readonly ServerChange[]): ServerChange[] {
  const takerOf = new Map(moves.map((m) => [hostPort(m.to.address, m.to.port), m]));
  const done = new Set<ServerChange>();
  const ordered: ServerChange[] = [];
  const visit = (m: ServerChange): void => {
    if (done.has(m)) return;
    done.add(m);
    const taker = takerOf.get(hostPort(m.from.address, m.from.port));
    if (taker) visit(taker);
    ordered.push(m);
  };
  for (const m of moves) visit(m);
  return ordered;
}

function show(s: SlotState): string {
  return hostPort(s.address, s.port);
}
