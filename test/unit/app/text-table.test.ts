import { describe, expect, it } from "vitest";
import { formatTable } from "../../../shared/app/text-table.js";

describe("formatTable", () => {
  it("pads every column but the last to its widest cell, two spaces apart", () => {
    expect(
      formatTable([
        ["NODE", "STATE", "LAST ERROR"],
        ["node-a", "current", "-"],
        ["b", "behind", "check: haproxy -c failed"],
      ]),
    ).toBe(
      ["NODE    STATE    LAST ERROR", "node-a  current  -", "b       behind   check: haproxy -c failed"].join("\n"),
    );
  });

  it("leaves no trailing spaces when the last cell is empty", () => {
    expect(
      formatTable([
        ["A", "B"],
        ["long", ""],
      ]),
    ).toBe("A     B\nlong");
  });

  it("prints nothing for no rows", () => {
    expect(formatTable([])).toBe("");
  });
});
