import { describe, expect, it } from "vitest";
import { splitMemo } from "../../../shared/agent/split-memo.js";
import { renderPatternSection, splitConfig } from "../../../shared/core/pattern-files.js";

const HEAD = "global\n    daemon\n";
const withList = (entries: string[]) => HEAD + renderPatternSection([{ path: "patterns/default.web.allow", entries }]);

describe("splitMemo", () => {
  it("splits each text once while it is one of the newest two, and as splitConfig does", () => {
    const split = splitMemo();
    const [a, b, c] = [withList(["10.0.0.1"]), withList(["10.0.0.2"]), withList(["10.0.0.3"])];
    const first = split(a);
    expect(first).toEqual(splitConfig(a));
    // An equal text built anew is the same config: the same split.
    expect(split(a.split("").join(""))).toBe(first);
    expect(split(b)).toEqual(splitConfig(b));
    expect(split(a)).toBe(first);
    split(c);
    split(b);
    // Three texts since: `a` is split again, to an equal result.
    const again = split(a);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });

  it("keeps an error as splitConfig reports it", () => {
    const split = splitMemo();
    const bad = withList(["10.0.0.1"]).replace("10.0.0.1", "not-an-address");
    expect(split(bad)).toEqual({ error: expect.stringMatching(/not-an-address.*is not an address or CIDR/) });
    expect(split(bad)).toEqual(splitConfig(bad));
  });
});
