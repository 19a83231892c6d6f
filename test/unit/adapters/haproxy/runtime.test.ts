import { describe, expect, it } from "vitest";
import { splitAnswers } from "../../../../shared/adapters/haproxy/runtime.js";

describe("splitAnswers", () => {
  it("reads one answer per command, an empty one as a lone empty line (HAProxy 2.6's CLI output)", () => {
    const out = "IP changed from 'a' to 'b'\n\n\nNo such server.\n\n\n";
    expect(splitAnswers(out, 4)).toEqual(["IP changed from 'a' to 'b'", "", "No such server.", ""]);
    expect(splitAnswers("\n", 1)).toEqual([""]);
    expect(splitAnswers("first\nsecond\n\n", 1)).toEqual(["first\nsecond"]);
  });

  it("is null when the answers are not the commands' count, or the output stops mid-answer", () => {
    expect(splitAnswers("IP changed\n\n\n", 1)).toBeNull();
    expect(splitAnswers("IP changed\n\n", 2)).toBeNull();
    expect(splitAnswers("IP changed\n", 1)).toBeNull();
    expect(splitAnswers("IP changed", 1)).toBeNull();
    expect(splitAnswers("", 1)).toBeNull();
  });
});
