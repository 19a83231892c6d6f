import { describe, expect, it } from "vitest";
import { describeValue } from "../../../shared/core/describe-value.js";

describe("describeValue", () => {
  it("quotes a value so that spaces and control characters show", () => {
    expect(describeValue("a b\n")).toBe('"a b\\n"');
  });

  it("cuts a long value to 64 characters", () => {
    expect(describeValue("x".repeat(64))).toBe(`"${"x".repeat(64)}"`);
    expect(describeValue("x".repeat(1000))).toBe(`"${"x".repeat(64)}…"`);
  });

  it("cuts at the length it is given", () => {
    expect(describeValue("abcdef", 6)).toBe('"abcdef"');
    expect(describeValue("abcdefg", 6)).toBe('"abcdef…"');
  });
});
