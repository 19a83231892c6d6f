import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { diffConfigs } from "../../../../shared/core/haproxy-config/diff.js";
import {
  commandText,
  planRuntime,
  type RuntimePlan,
  runtimeLines,
} from "../../../../shared/core/haproxy-config/runtime-plan.js";
import { assignSlots } from "../../../../shared/core/model/slots.js";
import { parsed } from "../../../support/haproxy-config.js";

// Old config and new config in, exact runtime API commands out (the shape of haproxy-ingress's
// dynupdate tests), then a property: no command sequence ever leaves a backend with fewer ready
// servers than min(before, after), and every sequence ends in exactly the new config's slots.

/** A backend section as the built-in templates write it: `slots[i]` is s<i+1>'s endpoint, null free. */
function backend(name: string, slots: Array<string | null>): string {
  const lines = slots.map((a, i) => `    server s${i + 1} ${a ?? "127.0.0.1:1 disabled"}`);
  return `backend ${name} from http_defaults\n    balance roundrobin\n${lines.join("\n")}\n`;
}

function plan(before: string, after: string): RuntimePlan {
  const d = diffConfigs(parsed(before), parsed(after));
  if (d.kind !== "runtime") throw new Error(`expected a runtime diff, got ${JSON.stringify(d)}`);
  return planRuntime(d.changes, d.spare, d.adds);
}

function commands(before: Array<string | null>, after: Array<string | null>): string[] | string {
  const p = plan(backend("web", before), backend("web", after));
  return p.kind === "runtime" ? p.commands.map(commandText) : `reload: ${p.reason}`;
}

const A = "10.0.0.1:8080";
const B = "10.0.0.2:8080";
const C = "10.0.0.3:8080";

describe("planRuntime", () => {
  it("brings a new endpoint up in its free slot, addressed while still in maintenance", () => {
    expect(commands([A, null, null, null], [A, B, null, null])).toEqual([
      "set server web/s2 addr 10.0.0.2 port 8080",
      "set server web/s2 state ready",
    ]);
  });

  it("drains, then stops, then parks a leaving endpoint", () => {
    expect(commands([A, B, null, null], [A, null, null, null])).toEqual([
      "set server web/s2 state drain",
      "set server web/s2 state maint",
      "set server web/s2 addr 127.0.0.1 port 1",
    ]);
  });

  it("moves between slots: the new one is ready before the old one drains", () => {
    expect(commands([A, null, null, null], [null, null, B, null])).toEqual([
      "set server web/s3 addr 10.0.0.2 port 8080",
      "set server web/s3 state ready",
      "set server web/s1 state drain",
      "set server web/s1 state maint",
      "set server web/s1 addr 127.0.0.1 port 1",
    ]);
  });

  it("moves the only endpoint in place through a spare slot, which ends as it began", () => {
    expect(commands([A, null, null, null], [B, null, null, null])).toEqual([
      "set server web/s2 addr 10.0.0.2 port 8080",
      "set server web/s2 state ready",
      "set server web/s1 state drain",
      "set server web/s1 state maint",
      "set server web/s1 addr 10.0.0.2 port 8080",
      "set server web/s1 state ready",
      "set server web/s2 state drain",
      "set server web/s2 state maint",
      "set server web/s2 addr 127.0.0.1 port 1",
    ]);
  });

  it("does ups, then moves, then downs in one backend", () => {
    const out = commands([A, B, null, null], [C, null, A, null]) as string[];
    // s3 comes up first, s1 moves through the spare s4, s2 goes last.
    expect(out.map((c) => c.replace(/^set server web\//, ""))).toEqual([
      "s3 addr 10.0.0.1 port 8080",
      "s3 state ready",
      "s4 addr 10.0.0.3 port 8080",
      "s4 state ready",
      "s1 state drain",
      "s1 state maint",
      "s1 addr 10.0.0.3 port 8080",
      "s1 state ready",
      "s4 state drain",
      "s4 state maint",
      "s4 addr 127.0.0.1 port 1",
      "s2 state drain",
      "s2 state maint",
      "s2 addr 127.0.0.1 port 1",
    ]);
  });

  it("shifts a neighbour in place when a pod is replaced and no slot is free before and after: the up first, then each slot after its address's new one", () => {
    // Placement by hash (core/model/slots.ts): A leaves, B moves back into A's slot, C comes into
    // the slot that was free; the slot B leaves is free after. No spare, but the up is capacity.
    const p = plan(backend("web", [A, B, null]), backend("web", [B, null, C]));
    if (p.kind !== "runtime") throw new Error(p.reason);
    expect(p.commands.map(commandText)).toEqual([
      "set server web/s3 addr 10.0.0.3 port 8080",
      "set server web/s3 state ready",
      "set server web/s1 state drain",
      "set server web/s1 state maint",
      "set server web/s1 addr 10.0.0.2 port 8080",
      "set server web/s1 state ready",
      "set server web/s2 state drain",
      "set server web/s2 state maint",
      "set server web/s2 addr 127.0.0.1 port 1",
    ]);
  });

  it("reloads an in-place move when no slot is free to bridge it", () => {
    expect(commands([A, B], [C, B])).toBe(
      "reload: web/s1 moves from 10.0.0.1:8080 to 10.0.0.3:8080 and the backend has no free slot to carry the new address meanwhile",
    );
  });

  it("brackets IPv6 in the reason and sends it bare to HAProxy", () => {
    expect(commands(["[fd00::1]:80", null], ["[fd00::2]:80", null])).toContain(
      "set server web/s2 addr fd00::2 port 80",
    );
    expect(commands(["[fd00::1]:80"], ["[fd00::2]:80"])).toMatch(/from \[fd00::1\]:80 to \[fd00::2\]:80/);
  });

  it("adds the slots a backend grew by in maintenance, then readies the one that carries an endpoint with the ups", () => {
    expect(commands([A, null], [A, B, null, C])).toEqual([
      "add server web/s3 127.0.0.1:1",
      "add server web/s4 10.0.0.3:8080",
      "set server web/s2 addr 10.0.0.2 port 8080",
      "set server web/s4 state ready",
      "set server web/s2 state ready",
    ]);
  });

  it("moves an endpoint in place through a slot the backend just grew by", () => {
    expect(commands([A, B], [C, B, null])).toEqual([
      "add server web/s3 127.0.0.1:1",
      "set server web/s3 addr 10.0.0.3 port 8080",
      "set server web/s3 state ready",
      "set server web/s1 state drain",
      "set server web/s1 state maint",
      "set server web/s1 addr 10.0.0.3 port 8080",
      "set server web/s1 state ready",
      "set server web/s3 state drain",
      "set server web/s3 state maint",
      "set server web/s3 addr 127.0.0.1 port 1",
    ]);
  });

  it("keeps backends apart: each uses its own spare", () => {
    const p = plan(
      backend("a", [A, null]) + backend("b", [B, null]),
      backend("a", [C, null]) + backend("b", [A, null]),
    );
    expect(
      p.kind === "runtime" &&
        p.commands.filter((c) => c.op === "state" && c.state === "ready").map((c) => `${c.backend}/${c.server}`),
    ).toEqual(["a/s2", "a/s1", "b/s2", "b/s1"]);
  });
});

/** A slot's runtime state as the commands leave it. */
interface Live {
  addr: string;
  admin: "ready" | "drain" | "maint";
}

function liveOf(slots: Array<string | null>): Map<string, Live> {
  return new Map(
    slots.map((a, i) => [`s${i + 1}`, { addr: a ?? "127.0.0.1:1", admin: a === null ? "maint" : "ready" }]),
  );
}

const pool = Array.from({ length: 12 }, (_, i) => `10.1.0.${i + 1}:8080`);
const endpointSet = fc.uniqueArray(fc.constantFrom(...pool), { maxLength: 8 });
/**
 * A backend's endpoints before and after, placed into its slots: as many after as before, or
 * more (it grew: the new slots appended, endpoints hashed into the first as before). Fewer is a
 * fresh layout's reload, not the planner's business.
 */
const slotChange = fc
  .tuple(endpointSet, endpointSet, fc.constantFrom(8, 9, 12, 16), fc.nat({ max: 4 }))
  .map(([before, after, slots, grown]) => ({
    before,
    after,
    old: assignSlots(before, slots),
    next: assignSlots(after, slots + grown, slots),
  }));

describe("planRuntime, any endpoint change of a backend", () => {
  it("never has fewer ready servers than min(before, after), never re-addresses a serving slot, and ends in the new slots", () => {
    fc.assert(
      fc.property(slotChange, ({ before, after, old, next }) => {
        const d = diffConfigs(parsed(backend("web", old)), parsed(backend("web", next)));
        if (d.kind === "identical") return;
        expect(d.kind).toBe("runtime");
        if (d.kind !== "runtime") return;
        const p = planRuntime(d.changes, d.spare, d.adds);
        if (p.kind === "reload") {
          // Only for lack of a spare slot.
          expect(next.concat(old).filter((a) => a === null).length).toBeLessThan(2 * old.length);
          expect(p.reason).toMatch(/no free slot/);
          return;
        }
        const live = liveOf(old);
        const ready = () => [...live.values()].filter((l) => l.admin === "ready").length;
        const floor = Math.min(before.length, after.length);
        for (const c of p.commands) {
          if (c.op === "add") {
            expect(live.has(c.server), `${commandText(c)}: the slot exists`).toBe(false);
            live.set(c.server, { addr: `${c.address}:${c.port}`, admin: "maint" });
            continue;
          }
          const slot = live.get(c.server)!;
          if (c.op === "addr") {
            expect(slot.admin, `${commandText(c)} on a slot in ${slot.admin}`).toBe("maint");
            slot.addr = c.address.includes(":") ? `[${c.address}]:${c.port}` : `${c.address}:${c.port}`;
          } else slot.admin = c.state;
          expect(ready(), commandText(c)).toBeGreaterThanOrEqual(floor);
        }
        expect(live).toEqual(liveOf(next));
      }),
      { numRuns: 500 },
    );
  });
});

describe("runtimeLines", () => {
  it("puts an in-place move on seven lines and a pod replaced in another slot on four", () => {
    const lines = (before: Array<string | null>, after: Array<string | null>) => {
      const p = plan(backend("web", before), backend("web", after));
      if (p.kind !== "runtime") throw new Error(p.reason);
      return runtimeLines(p.commands).map((line) => line.map((c) => commandText(c).replace("set server web/", "")));
    };
    expect(lines([A, null], [B, null])).toEqual([
      ["s2 addr 10.0.0.2 port 8080"],
      ["s2 state ready"],
      ["s1 state drain", "s1 state maint"],
      ["s1 addr 10.0.0.2 port 8080"],
      ["s1 state ready"],
      ["s2 state drain", "s2 state maint"],
      ["s2 addr 127.0.0.1 port 1"],
    ]);
    expect(lines([A, B, null, null], [null, B, C, A])).toEqual([
      ["s3 addr 10.0.0.3 port 8080", "s4 addr 10.0.0.1 port 8080"],
      ["s3 state ready", "s4 state ready"],
      ["s1 state drain", "s1 state maint"],
      ["s1 addr 127.0.0.1 port 1"],
    ]);
  });

  it("whichever one command HAProxy refuses, running its line and none after never leaves fewer ready servers than min(before, after), nor a slot ready on an address of neither config", () => {
    fc.assert(
      fc.property(slotChange, ({ before, after, old, next }) => {
        const d = diffConfigs(parsed(backend("web", old)), parsed(backend("web", next)));
        if (d.kind !== "runtime") return;
        const p = planRuntime(d.changes, d.spare, d.adds);
        if (p.kind === "reload") return;
        const lines = runtimeLines(p.commands);
        expect(lines.flat()).toEqual(p.commands);
        const floor = Math.min(before.length, after.length);
        const endpoints = new Set([...before, ...after]);
        for (let refused = 0; refused < p.commands.length; refused++) {
          const live = liveOf(old);
          let index = 0;
          for (const line of lines) {
            let failed = false;
            for (const c of line) {
              if (index++ === refused) {
                failed = true;
                continue;
              }
              if (c.op === "add") {
                live.set(c.server, { addr: `${c.address}:${c.port}`, admin: "maint" });
                continue;
              }
              // A slot whose add was refused does not exist: HAProxy refuses its commands too.
              const slot = live.get(c.server);
              if (!slot) continue;
              if (c.op === "addr") slot.addr = `${c.address}:${c.port}`;
              else slot.admin = c.state;
              const ready = [...live.values()].filter((l) => l.admin === "ready");
              // expect() only where the property fails: built for each of the run's thousands of
              // steps, its assertions took most of this test's time.
              if (ready.length < floor)
                expect(ready.length, `${commandText(c)} after refusing #${refused}`).toBeGreaterThanOrEqual(floor);
              for (const l of ready)
                if (!endpoints.has(l.addr))
                  expect(endpoints.has(l.addr), `${l.addr} ready after refusing #${refused}`).toBe(true);
            }
            if (failed) break;
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
