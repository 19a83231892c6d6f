import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compareConfigNames,
  type ConfigName,
  formatConfigName,
  MAX_EPOCH,
  MAX_SEQ,
} from "../../../../shared/core/publish/config-key.js";
import { distrust, EPOCH_LEAD, judgeKeys, SEQ_LEAD } from "../../../../shared/core/publish/key-trust.js";
import { decidePublish, nextSeq, type StoreState } from "../../../../shared/core/publish/publish-order.js";

const name = (epoch: number, revision: number, seq: number, sha = "a"): ConfigName => ({
  epoch,
  revision: BigInt(revision),
  seq,
  shaPrefix: sha.repeat(16),
  legacy: false,
});

describe("which keys may be followed", () => {
  it("a key may lead the trusted key before it by one epoch and by SEQ_LEAD seqs, no more", () => {
    const before = name(3, 100, 7);
    expect(distrust(name(3 + EPOCH_LEAD, 10, 0), before)).toBeNull();
    expect(distrust(name(3, 200, 7 + SEQ_LEAD), before)).toBeNull();
    expect(distrust(name(5, 10, 0), before)).toMatch(/epoch 5 leads the key before it \(epoch 3\) by more than 1/);
    expect(distrust(name(3, 100, 7 + SEQ_LEAD + 1), before)).toMatch(/seq 24 leads the key before it \(seq 7\)/);
    // Lower counters lead nothing: a later revision is a later decision whatever its seq.
    expect(distrust(name(3, 300, 0), before)).toBeNull();
  });

  it("the first key of a listing starts in the lower half of each field; the last value of a field is never followed", () => {
    expect(distrust(name(499_999, 5, 4_999_999_999), null)).toBeNull();
    expect(distrust(name(500_000, 5, 0), null)).toMatch(/no key before it/);
    expect(distrust(name(0, 5, 5_000_000_000), null)).toMatch(/no key before it/);
    expect(distrust(name(MAX_EPOCH, 5, 0), name(MAX_EPOCH - 1, 1, 0))).toMatch(/last value/);
    expect(distrust(name(0, 5, MAX_SEQ), name(0, 5, MAX_SEQ - 1))).toMatch(/last value/);
  });

  it("judges each key from the trusted key before it: a skipped key moves nothing, an anchor stands for the history before it", () => {
    const keys = [name(0, 10, 0), name(0, 10, 9_999_999_999), name(999_999, 10, 0), name(0, 11, 0), name(1, 5, 0)].sort(
      compareConfigNames,
    );
    expect(keys.map(formatKey)).toEqual(["0/10/0", "0/10/9999999999", "0/11/0", "1/5/0", "999999/10/0"]);
    expect(judgeKeys(keys).map((r) => r === null)).toEqual([true, false, true, true, false]);
    // From an anchor at epoch 998000 (say a store walked there by trusted steps), the same keys judge differently.
    const walked = [name(0, 1, 0), name(998_000, 1, 0), name(998_001, 2, 0)];
    expect(judgeKeys(walked).map((r) => r === null)).toEqual([true, false, false]);
    expect(judgeKeys(walked, 1).map((r) => r === null)).toEqual([true, true, true]);
  });

  it("no store of trusted keys lets the publisher's next key overflow, and one write moves a field by a bounded step", () => {
    const field = fc.oneof(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: MAX_SEQ }));
    const key = fc
      .record({
        epoch: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: MAX_EPOCH })),
        revision: fc.integer({ min: 0, max: 50 }),
        seq: field,
      })
      .map((k) => name(Math.min(k.epoch, MAX_EPOCH), k.revision, Math.min(k.seq, MAX_SEQ)));
    fc.assert(
      fc.property(fc.array(key, { maxLength: 12 }), (keys) => {
        const sorted = [...keys].sort(compareConfigNames);
        const verdicts = judgeKeys(sorted);
        const trusted = sorted.filter((_, i) => verdicts[i] === null);
        let before: ConfigName | null = null;
        for (const k of trusted) {
          if (before === null) expect(k.epoch < MAX_EPOCH / 2 && k.seq < MAX_SEQ / 2).toBe(true);
          else {
            expect(k.epoch).toBeLessThanOrEqual(before.epoch + EPOCH_LEAD);
            expect(k.seq).toBeLessThanOrEqual(before.seq + SEQ_LEAD);
          }
          before = k;
        }
        const newest = trusted.at(-1) ?? null;
        if (newest === null) return;
        const state: StoreState = { newest: { name: newest, sha256: "x" }, view: null };
        for (const revision of [newest.revision - 1n, newest.revision, newest.revision + 1n])
          for (const restore of [false, true]) {
            const d = decidePublish(state, { revision: revision < 0n ? 0n : revision, sha256: "y" }, restore);
            if (d.kind === "write") expect(() => formatConfigName({ ...d, shaPrefix: "b".repeat(16) })).not.toThrow();
          }
      }),
    );
  });
});

describe("what a publish numbers its key", () => {
  it("seq 0 for a view no config has, the newest seq + 1 for another decision from the newest config's view", () => {
    const newest = name(2, 100, 4);
    expect(nextSeq(newest, 2, 100n)).toBe(5);
    expect(nextSeq(newest, 2, 101n)).toBe(0);
    expect(nextSeq(newest, 3, 100n)).toBe(0);
    expect(nextSeq(null, 0, 100n)).toBe(0);
    const state: StoreState = { newest: { name: newest, sha256: "x" }, view: null };
    expect(decidePublish(state, { revision: 100n, sha256: "y" }, false)).toMatchObject({ kind: "write", seq: 5 });
    expect(decidePublish(state, { revision: 150n, sha256: "y" }, false)).toMatchObject({
      kind: "write",
      epoch: 2,
      seq: 0,
    });
    expect(decidePublish(state, { revision: 50n, sha256: "y" }, true)).toMatchObject({
      kind: "write",
      epoch: 3,
      seq: 0,
      newEpoch: true,
    });
  });
});

function formatKey(n: ConfigName): string {
  return `${n.epoch}/${n.revision}/${n.seq}`;
}
