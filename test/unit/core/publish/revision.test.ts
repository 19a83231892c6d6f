import { describe, expect, it } from "vitest";
import {
  compareRevisions,
  decimalRevision,
  newerRevision,
  parseRevision,
} from "../../../../shared/core/publish/revision.js";

describe("cluster revisions", () => {
  it.each([
    ["42", "42"],
    ["0042", "42"],
    ["0", "0"],
    ["000", "0"],
    ["12a", null],
    ["", null],
    [42, null],
    [undefined, null],
    ["1".repeat(31), null],
  ])("reads %j as the decimal %j", (value, digits) => {
    expect(decimalRevision(value)).toBe(digits);
  });

  it.each([
    ["9", "10", -1],
    ["10", "9", 1],
    ["010", "10", 0],
    ["18446744073709551616", "18446744073709551615", 1],
    ["abc", "abd", -1],
    ["9", "x", -1],
  ])("orders %j against %j: %i (decimals by value, others by text)", (a, b, sign) => {
    expect(Math.sign(compareRevisions(a, b))).toBe(sign);
    expect(Math.sign(compareRevisions(b, a))).toBe(sign === 0 ? 0 : -sign);
  });

  it.each([
    ["99", "100", "100"],
    ["100", "99", "100"],
    ["", "7", "7"],
    ["7", "", "7"],
    ["", "", "0"],
  ])("takes the newer of %j and %j: %j", (a, b, newer) => {
    expect(newerRevision(a, b)).toBe(newer);
  });

  it("parses a snapshot revision for the store's keys, refusing what cannot order snapshots", () => {
    expect(parseRevision("12345")).toBe(12345n);
    expect(() => parseRevision("12a")).toThrow(/must be a decimal resourceVersion/);
    expect(() => parseRevision("1".repeat(21))).toThrow(/more than 20 digits/);
  });
});
