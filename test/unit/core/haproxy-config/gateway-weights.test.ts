import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DRAW_RANGE,
  drawIds,
  WEIGHTS_MAP,
  weightLineError,
  weightMapLines,
} from "../../../../shared/core/haproxy-config/gateway-weights.js";
import { renderPatternSection, splitConfig } from "../../../../shared/core/haproxy-config/pattern-files.js";

const V1 = "gw:default:v1:8080";
const V2 = "gw:default:v2:8080";
const V3 = "gw:default:v3:8080";

describe("drawIds", () => {
  it("numbers keys by their hash: distinct, whatever their order, others' kept when a key comes or goes", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ maxLength: 12 }), { minLength: 1, maxLength: 40 }), (keys) => {
        const ids = drawIds(keys);
        expect(new Set(ids.values()).size).toBe(keys.length);
        expect(drawIds([...keys].reverse())).toEqual(ids);
        const fewer = drawIds(keys.slice(1));
        for (const key of keys.slice(1)) expect(fewer.get(key)).toBe(ids.get(key));
        for (const id of ids.values()) {
          const hi = (id + 1) * DRAW_RANGE - 1;
          expect(weightLineError(`${id * DRAW_RANGE}:${hi} gw:500`)).toBeNull();
        }
      }),
    );
  });

  it("gives keys whose hashes collide distinct numbers, the first in key order its own", () => {
    // 200,000 keys in 2^29 numbers: a few dozen collide (the birthday bound).
    const keys = Array.from({ length: 200_000 }, (_, i) => `8081/default/r${i}#0`);
    const ids = drawIds(keys);
    expect(new Set(ids.values()).size).toBe(keys.length);
    const moved = keys.filter((k) => drawIds([k]).get(k) !== ids.get(k));
    expect(moved.length).toBeGreaterThan(0);
    for (const k of moved) expect(ids.get(k)).toBe(((drawIds([k]).get(k) ?? 0) + 1) % 2 ** 29);
  });
});

describe("weightMapLines", () => {
  it("gives each share a run of its rule's range as long as its part of the total; weight 0 none", () => {
    const lines = weightMapLines(
      [
        {
          id: 0,
          picks: [
            { backend: V1, weight: 70 },
            { backend: V2, weight: 30 },
            { backend: V3, weight: 0 },
          ],
        },
        {
          id: 1,
          picks: [
            { backend: V1, weight: 1 },
            { backend: null, weight: 1 },
          ],
        },
      ],
      "gw:500",
    );
    const split = Math.floor(0.7 * DRAW_RANGE);
    const half = DRAW_RANGE / 2;
    expect(lines).toEqual([
      `0:${split - 1} ${V1}`,
      `${split}:${DRAW_RANGE - 1} ${V2}`,
      `${DRAW_RANGE}:${DRAW_RANGE + half - 1} ${V1}`,
      `${DRAW_RANGE + half}:${2 * DRAW_RANGE - 1} gw:500`,
    ]);
  });

  it("gives a rule whose weights are all 0 its whole range to the invalid backend", () => {
    const picks = [
      { backend: V1, weight: 0 },
      { backend: V2, weight: 0 },
    ];
    expect(
      weightMapLines(
        [
          { id: 1, picks },
          { id: 0, picks },
        ],
        "gw:500",
      ),
    ).toEqual([`0:${DRAW_RANGE - 1} gw:500`, `${DRAW_RANGE}:${2 * DRAW_RANGE - 1} gw:500`]);
  });

  it("covers each rule's range exactly, each share within a draw of its weight's part, every line valid (property)", () => {
    const weights = fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: 2, maxLength: 16 });
    fc.assert(
      fc.property(fc.array(weights, { minLength: 1, maxLength: 5 }), (rules) => {
        const lines = weightMapLines(
          rules.map((w, id) => ({ id, picks: w.map((weight, i) => ({ backend: `gw:ns:s${i}:80`, weight })) })),
          "gw:500",
        );
        for (const line of lines) expect(weightLineError(line)).toBeNull();
        const ranges = lines.map((l) => {
          const [range, backend] = l.split(" ");
          const [lo, hi] = range!.split(":").map(Number);
          return { lo: lo!, hi: hi!, backend: backend! };
        });
        let next = 0;
        for (const r of ranges) {
          expect(r.lo).toBe(next);
          next = r.hi + 1;
        }
        expect(next).toBe(rules.length * DRAW_RANGE);
        rules.forEach((w, n) => {
          const total = w.reduce((a, b) => a + b, 0);
          w.forEach((weight, i) => {
            const held = ranges
              .filter((r) => r.backend === `gw:ns:s${i}:80` && r.lo >= n * DRAW_RANGE && r.hi < (n + 1) * DRAW_RANGE)
              .reduce((sum, r) => sum + r.hi - r.lo + 1, 0);
            const want = total === 0 ? 0 : (weight * DRAW_RANGE) / total;
            expect(Math.abs(held - want)).toBeLessThanOrEqual(1);
          });
        });
      }),
    );
  });
});

describe("weightLineError", () => {
  it.each([
    ["0:1048575 gw:default:web:80", null],
    ["5:5 gw:500", null],
    ["7:6 gw:500", "is an empty range"],
    ["0:10 default_web_80", "is not <lo>:<hi> <Gateway backend>"],
    ["0:10 gw:a b", "is not <lo>:<hi> <Gateway backend>"],
    ["-1:10 gw:500", "is not <lo>:<hi> <Gateway backend>"],
    ["10 gw:500", "is not <lo>:<hi> <Gateway backend>"],
  ])("%s: %s", (line, error) => {
    expect(weightLineError(line)).toBe(error);
  });

  it("is what a config's pattern section is held to", () => {
    const good = `x\n${renderPatternSection([{ path: WEIGHTS_MAP, entries: ["0:9 gw:500"] }])}`;
    expect(splitConfig(good)).toMatchObject({ files: new Map([[WEIGHTS_MAP, ["0:9 gw:500"]]]) });
    const bad = `x\n${renderPatternSection([{ path: WEIGHTS_MAP, entries: ["0:9 gw:500; del map"] }])}`;
    expect(splitConfig(bad)).toMatchObject({ error: expect.stringContaining("is not <lo>:<hi> <Gateway backend>") });
  });
});
