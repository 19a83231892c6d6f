import { describe, expect, it } from "vitest";
import { programmingInput, withProgrammed } from "../../../../shared/core/gateway/programmed.js";
import {
  condition,
  CONTROLLER_NAME,
  type GatewayObjectStatus,
  type RouteParentStatus,
} from "../../../../shared/core/gateway/status.js";
import {
  mergeClassStatus,
  mergeConditions,
  mergeGatewayStatus,
  mergeRouteStatus,
  statusDiffers,
} from "../../../../shared/core/gateway/status-merge.js";

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-02T00:00:00.000Z";
const ref = { group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "default", name: "gw" };
const ours = (ok: boolean, gen = 1): RouteParentStatus => ({
  parentRef: ref,
  controllerName: CONTROLLER_NAME,
  conditions: [
    condition("Accepted", ok, ok ? "Accepted" : "NotAllowedByListeners", "m", gen),
    condition("ResolvedRefs", true, "ResolvedRefs", "m", gen),
  ],
});
const theirs = {
  parentRef: { ...ref, name: "other" },
  controllerName: "example.com/other",
  conditions: [{ type: "Accepted", status: "True", reason: "Accepted", lastTransitionTime: T0 }],
};

function gatewayStatus(pending = true): GatewayObjectStatus {
  const programmed = {
    type: "Programmed",
    status: pending ? ("Unknown" as const) : ("False" as const),
    reason: pending ? "Pending" : "Invalid",
    message: "m",
    observedGeneration: 3,
  };
  return {
    namespace: "default",
    name: "gw",
    conditions: [condition("Accepted", true, "Accepted", "m", 3), programmed],
    listeners: [
      {
        name: "http",
        supportedKinds: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute" }],
        attachedRoutes: 1,
        conditions: [condition("Accepted", true, "Accepted", "m", 3), programmed],
      },
    ],
  };
}

describe("mergeConditions", () => {
  it("keeps lastTransitionTime while a condition's status stays, and takes now when it changes or is new", () => {
    const held = [
      { type: "Accepted", status: "True", reason: "Accepted", message: "old", lastTransitionTime: T0 },
      { type: "ResolvedRefs", status: "True", reason: "ResolvedRefs", message: "m", lastTransitionTime: T0 },
    ];
    const merged = mergeConditions(
      held,
      [
        condition("Accepted", true, "Accepted", "new message", 2),
        condition("ResolvedRefs", false, "BackendNotFound", "m", 2),
        condition("PartiallyInvalid", true, "UnsupportedValue", "m", 2),
      ],
      T1,
    );
    expect(merged.map((c) => [c.type, c.lastTransitionTime, c.observedGeneration, c.message])).toEqual([
      ["Accepted", T0, 2, "new message"],
      ["ResolvedRefs", T1, 2, "m"],
      ["PartiallyInvalid", T1, 2, "m"],
    ]);
  });

  it("reads a mangled held status as none", () => {
    expect(
      mergeConditions("not a list", [condition("Accepted", true, "Accepted", "m", 1)], T1)[0]!.lastTransitionTime,
    ).toBe(T1);
    expect(mergeConditions([{ type: 1 }, null], [condition("Accepted", true, "Accepted", "m", 1)], T1)).toHaveLength(1);
  });
});

describe("mergeRouteStatus", () => {
  it("keeps other controllers' parents untouched and in place, and sets servicelb's own", () => {
    const held = { parents: [theirs, { ...ours(true), conditions: mergeConditions([], ours(true).conditions, T0) }] };
    const merged = mergeRouteStatus(held, [ours(false, 2)], "default", T1);
    const parents = merged.parents as Array<typeof theirs>;
    expect(parents[0]).toEqual(theirs);
    expect(parents[1]!.conditions.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ["Accepted", "False", T1],
      ["ResolvedRefs", "True", T0],
    ]);
  });

  it("removes servicelb's parents when none is desired, and leaves a status without any as it is", () => {
    const held = { parents: [theirs, { ...ours(true), conditions: mergeConditions([], ours(true).conditions, T0) }] };
    expect(mergeRouteStatus(held, [], "default", T1)).toEqual({ parents: [theirs] });
    expect(statusDiffers({ parents: [theirs] }, mergeRouteStatus({ parents: [theirs] }, [], "default", T1))).toBe(
      false,
    );
    expect(statusDiffers(undefined, mergeRouteStatus(undefined, [], "default", T1))).toBe(false);
  });

  it("matches a held parentRef without a namespace to the route's namespace", () => {
    const { namespace: _ns, ...bare } = ref;
    const held = {
      parents: [{ ...ours(true), parentRef: bare, conditions: mergeConditions([], ours(true).conditions, T0) }],
    };
    const merged = mergeRouteStatus(held, [ours(true)], "default", T1);
    expect(
      (merged.parents as Array<{ conditions: Array<{ lastTransitionTime: string }> }>)[0]!.conditions[0]!
        .lastTransitionTime,
    ).toBe(T0);
  });

  it("is a fixed point: merging into its own result writes nothing", () => {
    const first = mergeRouteStatus({ parents: [theirs] }, [ours(true)], "default", T0);
    // The API server hands fields back in its own order.
    const reorder = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reorder)
        : v !== null && typeof v === "object"
          ? Object.fromEntries(
              Object.entries(v)
                .reverse()
                .map(([k, x]) => [k, reorder(x)]),
            )
          : v;
    const reordered = reorder(JSON.parse(JSON.stringify(first)));
    expect(statusDiffers(reordered, mergeRouteStatus(reordered, [ours(true)], "default", T1))).toBe(false);
  });
});

describe("mergeGatewayStatus and mergeClassStatus", () => {
  it("set the Gateway's conditions and listeners, keep its addresses, and keep transition times", () => {
    const desired = gatewayStatus();
    const first = mergeGatewayStatus({ addresses: [{ value: "10.0.0.1" }] }, desired, T0);
    expect(first.addresses).toEqual([{ value: "10.0.0.1" }]);
    expect(first.listeners).toMatchObject([{ name: "http", attachedRoutes: 1 }]);
    const again = mergeGatewayStatus(first, desired, T1);
    expect(statusDiffers(first, again)).toBe(false);
    const changed = mergeGatewayStatus(
      first,
      { ...desired, listeners: [{ ...desired.listeners[0]!, attachedRoutes: 2 }] },
      T1,
    );
    expect(statusDiffers(first, changed)).toBe(true);
  });

  it("sets a GatewayClass's Accepted", () => {
    const merged = mergeClassStatus(
      undefined,
      { name: "c", conditions: [condition("Accepted", true, "Accepted", "m", 4)] },
      T0,
    );
    expect(merged).toEqual({
      conditions: [
        {
          type: "Accepted",
          status: "True",
          reason: "Accepted",
          message: "m",
          observedGeneration: 4,
          lastTransitionTime: T0,
        },
      ],
    });
  });
});

describe("withProgrammed", () => {
  it("sets Programmed True on the Gateway and its servable listeners once the fleet runs the config, Pending before", () => {
    const key = "configs/000000-00000000000000000042-0000000000-0123456789abcdef.cfg";
    const yes = withProgrammed(gatewayStatus(), key, { runs: true });
    expect([yes.conditions[1], yes.listeners[0]!.conditions[1]].map((c) => `${c!.status} ${c!.reason}`)).toEqual([
      "True Programmed",
      "True Programmed",
    ]);
    const no = withProgrammed(gatewayStatus(), key, { runs: false, why: "node a runs configs/x" });
    expect(no.conditions[1]).toMatchObject({ status: "False", reason: "Pending", observedGeneration: 3 });
    expect(no.conditions[1]!.message).toContain(key);
  });

  it("leaves a Gateway that cannot be served Invalid", () => {
    const invalid = withProgrammed(gatewayStatus(false), "k", { runs: true });
    expect(invalid.conditions[1]).toMatchObject({ status: "False", reason: "Invalid" });
  });

  it("changes the programming input when a route attaches or changes, not when Programmed does", () => {
    const g = gatewayStatus();
    const routes = [{ namespace: "default", name: "r", parents: [ours(true)] }];
    const base = programmingInput(g, routes);
    expect(programmingInput(withProgrammed(g, "k", { runs: true }), routes)).toBe(base);
    expect(programmingInput(g, [{ namespace: "default", name: "r", parents: [ours(true, 2)] }])).not.toBe(base);
    expect(programmingInput(g, [])).not.toBe(base);
    // A route on another Gateway does not count.
    expect(
      programmingInput(g, [
        ...routes,
        { namespace: "default", name: "s", parents: [{ ...ours(true), parentRef: { ...ref, name: "other" } }] },
      ]),
    ).toBe(base);
  });
});
