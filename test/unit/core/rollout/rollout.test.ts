import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChangeKind } from "../../../../shared/core/rollout/change-kind.js";
import {
  abortRollout,
  type NodeView,
  promoteRollout,
  type RolloutSettings,
  stepRollout,
} from "../../../../shared/core/rollout/rollout.js";
import {
  admittedNodes,
  initialRecord,
  type RolloutRecord,
  rolloutTarget,
  windowOf,
} from "../../../../shared/core/rollout/rollout-record.js";
import { DEFAULT_THRESHOLDS } from "../../../../shared/core/rollout/gate.js";
import { admissionOrder, parseWaves } from "../../../../shared/core/rollout/waves.js";

const settings: RolloutSettings = {
  waves: parseWaves("1,50%,100%"),
  bakeMs: 60_000,
  deadlineMs: 300_000,
  fallback: "hold",
  convergeMs: 30_000,
  thresholds: DEFAULT_THRESHOLDS,
};
const NODES = ["node-a", "node-b", "node-c", "node-d"];
const ref = (key: string) => ({ key, sha256: `sha-${key}` });
const t0 = new Date("2026-12-02T10:00:00Z");
const at = (s: number) => new Date(t0.getTime() + s * 1000);

/** Configs named s… differ from each other structurally; e… are endpoint variants of the key after the dot. */
const classify = (from: string, to: string): ChangeKind => {
  const base = (k: string) => (k.includes(".") ? k.split(".")[1]! : k);
  return from === to ? "identical" : base(from) === base(to) ? "endpoints" : "structural";
};

function fleet(record: RolloutRecord, traffic: (node: string, canary: boolean) => NodeView["traffic"]): NodeView[] {
  return NODES.map((node) => {
    const target = rolloutTarget(record, node);
    const canary = record.rollout !== null && target.key === record.rollout.candidate.key;
    return { node, applied: target.key, failure: null, traffic: traffic(node, canary) };
  });
}

const healthy = (record: RolloutRecord) => (node: string, canary: boolean) =>
  record.rollout === null
    ? null
    : {
        window: windowOf(record.rollout),
        key: canary ? record.rollout.candidate.key : record.stable.key,
        sampledAt: t0.toISOString(),
        backends: {
          web: { requests: 500, errors: 0, rtimeMs: 10 },
          [`n-${node}`]: { requests: 1, errors: 0, rtimeMs: 1 },
        },
      };

const broken = (record: RolloutRecord) => (node: string, canary: boolean) => {
  const h = healthy(record)(node, canary);
  return h && canary ? { ...h, backends: { ...h.backends, shop: { requests: 300, errors: 300, rtimeMs: 1 } } } : h;
};

function step(record: RolloutRecord, newest: string, s: number, traffic = healthy) {
  return stepRollout(
    record,
    { newest: ref(newest), nodes: fleet(record, traffic(record)), now: at(s), classify },
    settings,
  );
}

describe("stepRollout", () => {
  const start = initialRecord(ref("s1"), t0);

  it("sends an endpoint change to every node at once", () => {
    const { record, events } = step(start, "e.s1", 1);
    expect(record.stable.key).toBe("e.s1");
    expect(record.rollout).toBeNull();
    expect(events).toEqual(["e.s1: endpoints only, to every node at once"]);
  });

  it("rolls a good structural change out wave by wave, each after its bake time, in admission order", () => {
    let { record } = step(start, "s2", 0);
    const order = admissionOrder(NODES);
    expect(record.rollout).toMatchObject({ state: "rolling", wave: 0, sizes: [1, 2, 4], order });
    expect(NODES.map((n) => rolloutTarget(record, n).key).filter((k) => k === "s2")).toHaveLength(1);
    expect(rolloutTarget(record, order[0]!).key).toBe("s2");
    // Within its bake time a passing wave waits.
    ({ record } = step(record, "s2", 30));
    expect(record.rollout?.wave).toBe(0);
    expect(record.rollout?.gate?.verdict).toBe("pass");
    ({ record } = step(record, "s2", 61));
    expect(record.rollout?.wave).toBe(1);
    expect(admittedNodes(record.rollout!)).toEqual(order.slice(0, 2));
    ({ record } = step(record, "s2", 122));
    expect(record.rollout?.wave).toBe(2);
    const done = step(record, "s2", 183);
    expect(done.record.rollout).toBeNull();
    expect(done.record.stable.key).toBe("s2");
    expect(done.record.history.at(-1)).toMatchObject({ key: "s2", outcome: "promoted" });
  });

  describe("a structural change while no node has reported", () => {
    const none = (record: RolloutRecord, newest: string, s: number, nodes: NodeView[] = []) =>
      stepRollout(record, { newest: ref(newest), nodes, now: at(s), classify }, settings);

    it("is not promoted at once: it waits for nodes, then rolls out in waves of the nodes that report", () => {
      let { record, events } = none(start, "s2", 0);
      expect(record.rollout).toMatchObject({ state: "rolling", sizes: [] });
      expect(events).toEqual(["s2: structural change, rollout started"]);
      ({ record } = none(record, "s2", 120));
      expect(record.stable.key).toBe("s1");
      expect(record.rollout).toMatchObject({ state: "rolling", sizes: [] });
      // Nodes report (on the stable config): the waves are made of them, from the first.
      const reporting = NODES.map((node) => ({ node, applied: "s1", failure: null, traffic: null }));
      ({ record, events } = none(record, "s2", 130, reporting));
      expect(record.rollout).toMatchObject({
        state: "rolling",
        wave: 0,
        sizes: [1, 2, 4],
        order: admissionOrder(NODES),
      });
      expect(record.rollout!.waveStartedAt).toBe(at(130).toISOString());
      expect(events).toEqual(["s2: nodes report now: the rollout's waves are made of 4 of them"]);
    });

    it("is held by the fallback when no node reports by the deadline, and promoted with fallback promote", () => {
      const { record } = none(start, "s2", 0);
      const held = none(record, "s2", 301);
      expect(held.record.stable.key).toBe("s1");
      expect(held.record.rollout).toMatchObject({ state: "held" });
      expect(held.record.rollout!.reason).toBe(
        "no node reported by the deadline (300 s); held by the fallback until `servicelb rollout promote` or `abort`",
      );
      const promoted = stepRollout(
        record,
        { newest: ref("s2"), nodes: [], now: at(301), classify },
        { ...settings, fallback: "promote" },
      );
      expect(promoted.record.stable.key).toBe("s2");
      expect(promoted.record.rollout).toBeNull();
    });
  });

  it("rolls back a config that answers 5xx for one Service at the first canary, before its bake time ends", () => {
    let { record } = step(start, "s2", 0);
    const failed = step(record, "s2", 10, broken);
    record = failed.record;
    expect(record.rollout).toMatchObject({ state: "failed" });
    expect(record.rollout?.reason).toMatch(/^shop: 5xx rate 100\.00%/);
    expect(NODES.map((n) => rolloutTarget(record, n).key)).toEqual(Array(4).fill("s1"));
    expect(record.history.at(-1)).toMatchObject({ key: "s2", outcome: "rolled back" });
    expect(record.history.at(-1)?.gate?.backends[0]).toMatchObject({ backend: "shop", canary: { errors: 300 } });
    expect(record.rejected.map((r) => r.key)).toEqual(["s2"]);
    // Later structural publishes are held until an operator acts...
    const held = step(record, "s3", 20);
    expect(held.record.rollout?.candidate.key).toBe("s2");
    expect(held.record.blocked?.key).toBe("s3");
    // ...abort closes the failed rollout, and the next structural config rolls out.
    const closed = abortRollout(held.record, at(30)).record;
    expect(closed.rollout).toBeNull();
    expect(step(closed, "s3", 31).record.rollout?.candidate.key).toBe("s3");
    // The rejected config with other endpoints does not roll out again.
    const again = step(closed, "e.s2", 32).record;
    expect(again.rollout).toBeNull();
    expect(again.blocked?.reason).toMatch(/rejected config s2/);
  });

  it("fails a wave whose node cannot run the candidate, or does not run it in time", () => {
    const { record } = step(start, "s2", 0);
    const canary = admittedNodes(record.rollout!)[0]!;
    const nodes = fleet(record, () => null).map((n) =>
      n.node === canary
        ? { ...n, applied: "s1", failure: { key: "s2", stage: "check", message: "haproxy -c failed" } }
        : n,
    );
    const failed = stepRollout(record, { newest: ref("s2"), nodes, now: at(5), classify }, settings).record;
    expect(failed.rollout?.reason).toBe(`node ${canary} could not run s2 (check: haproxy -c failed)`);
    const stuck = nodes.map((n) => (n.node === canary ? { ...n, failure: null } : n));
    expect(
      stepRollout(record, { newest: ref("s2"), nodes: stuck, now: at(20), classify }, settings).record.rollout?.state,
    ).toBe("rolling");
    expect(
      stepRollout(record, { newest: ref("s2"), nodes: stuck, now: at(31), classify }, settings).record.rollout?.reason,
    ).toMatch(/does not run s2 30 s after its wave started/);
  });

  it("applies the fallback when traffic is too thin by the deadline, and says why", () => {
    const { record } = step(start, "s2", 0);
    const quiet = () => () => null;
    expect(step(record, "s2", 100, quiet).record.rollout?.state).toBe("rolling");
    const held = step(record, "s2", 301, quiet).record;
    expect(held.rollout?.state).toBe("held");
    expect(held.rollout?.reason).toMatch(
      /too little traffic to judge by the deadline \(300 s\): 0 canary requests.*held by the fallback/,
    );
    const promoted = stepRollout(
      record,
      { newest: ref("s2"), nodes: fleet(record, () => null), now: at(301), classify },
      { ...settings, fallback: "promote" },
    ).record;
    expect(promoted.rollout?.wave).toBe(1);
    // An operator moves a held rollout on.
    expect(promoteRollout(held, at(302)).record.rollout).toMatchObject({ state: "rolling", wave: 1 });
  });

  it("gives an endpoint change of the candidate to the admitted nodes at once; a structural one restarts the waves", () => {
    let { record } = step(start, "s2", 0);
    ({ record } = step(record, "s2", 61));
    expect(record.rollout?.wave).toBe(1);
    const moved = step(record, "e.s2", 62).record;
    expect(moved.rollout).toMatchObject({ wave: 1, id: "s2", candidate: { key: "e.s2" } });
    const restarted = step(moved, "s3", 63).record;
    expect(restarted.rollout).toMatchObject({ wave: 0, id: "s3", candidate: { key: "s3" } });
    expect(restarted.history.at(-1)).toMatchObject({ key: "e.s2", outcome: "superseded" });
  });

  it("ends a rollout, failed or not, when the cluster goes back to the stable structure: that reaches every node at once", () => {
    const rolling = step(start, "s2", 0).record;
    const back = step(rolling, "e.s1", 5);
    expect(back.record.rollout).toBeNull();
    expect(back.record.stable.key).toBe("e.s1");
    const failed = step(rolling, "s2", 5, broken).record;
    expect(step(failed, "e.s1", 6).record).toMatchObject({ rollout: null, stable: { key: "e.s1" } });
  });

  it("continues from the record alone: a step from a copy read back decides as the original would", () => {
    const { record } = step(start, "s2", 0);
    const copy = JSON.parse(JSON.stringify(record)) as RolloutRecord;
    expect(step(copy, "s2", 61).record).toEqual(step(record, "s2", 61).record);
  });
});

describe("rollout properties", () => {
  it("every node always runs the stable config or the candidate, admitted nodes only grow within a rollout, and a failed gate never advances", () => {
    const action = fc.oneof(
      fc.record({
        kind: fc.constant("publish" as const),
        key: fc.constantFrom("s1", "s2", "s3", "e.s2", "e.s3", "e.s1"),
      }),
      fc.record({ kind: fc.constant("tick" as const), seconds: fc.integer({ min: 1, max: 120 }), bad: fc.boolean() }),
      fc.record({ kind: fc.constantFrom("promote" as const, "abort" as const) }),
    );
    fc.assert(
      fc.property(fc.array(action, { maxLength: 30 }), (actions) => {
        let record = initialRecord(ref("s1"), t0);
        let newest = "s1";
        let clock = 0;
        for (const a of actions) {
          const before = record;
          if (a.kind === "publish") newest = a.key;
          if (a.kind === "tick") clock += a.seconds;
          if ((a.kind === "promote" || a.kind === "abort") && record.rollout === null) continue;
          record =
            a.kind === "promote"
              ? promoteRollout(record, at(clock)).record
              : a.kind === "abort"
                ? abortRollout(record, at(clock)).record
                : step(record, newest, clock, a.kind === "tick" && a.bad ? broken : healthy).record;
          for (const node of NODES) {
            const target = rolloutTarget(record, node).key;
            expect([record.stable.key, record.rollout?.candidate.key]).toContain(target);
          }
          if (
            a.kind === "tick" &&
            a.bad &&
            before.rollout?.state === "rolling" &&
            record.rollout?.id === before.rollout.id
          )
            expect(record.rollout.state).toBe("failed");
          if (
            before.rollout &&
            record.rollout &&
            before.rollout.id === record.rollout.id &&
            record.rollout.state !== "failed"
          )
            for (const n of admittedNodes(before.rollout)) expect(admittedNodes(record.rollout)).toContain(n);
        }
      }),
    );
  });
});
