import { describe, expect, it } from "vitest";
import type { ConfigName, Mark } from "../../../../shared/core/publish/config-key.js";
import { decidePublish, pickView } from "../../../../shared/core/publish/publish-order.js";

const config = (epoch: number, revision: number): ConfigName => ({
  epoch,
  revision: BigInt(revision),
  seq: 0,
  shaPrefix: "a".repeat(16),
  legacy: false,
});
const mark = (epoch: number, revision: number): Mark => ({ epoch, revision: BigInt(revision) });

describe("which view marker counts", () => {
  it("only in the newest config's epoch, and only at or below what the live cluster is known to have reached", () => {
    const views = [mark(0, 90), mark(1, 120), mark(2, 5), mark(1, 1_000_000)];
    expect(pickView(views, config(1, 100), 150n)).toEqual(mark(1, 120));
    expect(pickView(views, config(1, 100), 110n)).toBeNull();
    // A marker one epoch ahead of the newest config never counts: no epoch moves by a marker.
    expect(pickView(views, config(1, 100), null)).toEqual(mark(1, 1_000_000));
    expect(pickView([mark(1, 120)], config(0, 100), null)).toBeNull();
    expect(pickView(views, null, null)).toBeNull();
  });

  it("a forged marker far ahead of the live cluster neither holds a pass back nor starts an epoch", () => {
    const newest = { name: config(0, 100), sha256: "x" };
    const forged = [mark(0, 10 ** 15), mark(1, 101)];
    const view = pickView(forged, newest.name, 130n);
    expect(decidePublish({ newest, view }, { revision: 130n, sha256: "y" }, false)).toMatchObject({
      kind: "write",
      epoch: 0,
    });
    // The same markers, when the caller knows no live revision (no fresh list to ask): a stale pass, never an epoch.
    expect(
      decidePublish({ newest, view: pickView(forged, newest.name, null) }, { revision: 130n, sha256: "y" }, false),
    ).toMatchObject({ kind: "behind", mark: mark(0, 10 ** 15) });
  });
});
