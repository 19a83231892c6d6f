import { describe, expect, it } from "vitest";
import {
  admittedNodes,
  initialRecord,
  type RolloutRecord,
  rolloutTarget,
  waveOfNode,
} from "../../../../shared/core/rollout/rollout-record.js";

describe("waveOfNode", () => {
  it("names the wave whose admitted count first takes in the node's place in the order", () => {
    const rollout = { order: ["a", "b", "c", "d", "e"], sizes: [1, 2, 5] };
    expect(["a", "b", "c", "e", "z"].map((n) => waveOfNode(rollout, n))).toEqual([1, 2, 3, 3, null]);
  });
});

describe("rolloutTarget", () => {
  const record = (state: "rolling" | "failed"): RolloutRecord => ({
    ...initialRecord({ key: "stable", sha256: "s" }, new Date(0)),
    rollout: {
      id: "candidate",
      candidate: { key: "candidate", sha256: "c" },
      state,
      wave: 0,
      sizes: [1, 2],
      order: ["a", "b"],
      startedAt: "",
      waveStartedAt: "",
      reason: null,
      gate: null,
    },
  });

  it("gives the admitted waves the candidate and every other node stable", () => {
    expect(["a", "b", "c"].map((n) => rolloutTarget(record("rolling"), n).key)).toEqual([
      "candidate",
      "stable",
      "stable",
    ]);
  });

  it("gives every node stable once the rollout failed", () => {
    expect(admittedNodes(record("failed").rollout!)).toEqual([]);
    expect(rolloutTarget(record("failed"), "a").key).toBe("stable");
  });
});
