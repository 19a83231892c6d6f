import { describe, expect, it } from "vitest";
import {
  ANNOTATIONS,
  parseAnnotations,
  parseBool,
  parsePathPrefix,
} from "../../../../shared/core/model/annotations.js";

describe("parseBool", () => {
  it("reads Go's strconv.ParseBool spellings and nothing else", () => {
    for (const v of ["1", "t", "T", "TRUE", "true", "True"]) expect(parseBool(v)).toBe(true);
    for (const v of ["0", "f", "F", "FALSE", "false", "False"]) expect(parseBool(v)).toBe(false);
    for (const v of ["yes", "on", "tRUE", " true", "", "2"]) expect(parseBool(v)).toBeUndefined();
  });
});

describe("parsePathPrefix", () => {
  it.each([
    ["/", "/"],
    ["/api", "/api"],
    ["/api/v1/", "/api/v1"],
    ["/a%2Fb/c.d_e~f:g@h+i=j,k-l", "/a%2Fb/c.d_e~f:g@h+i=j,k-l"],
  ])("accepts %s as %s", (value, expected) => {
    expect(parsePathPrefix(value)).toBe(expected);
  });

  it.each([
    ["api", "no leading slash"],
    ["//api", "an empty segment"],
    ["/api path", "a space"],
    ["/api\nacl x", "a newline"],
    ["/a#b", "a comment sign"],
    ["/a%zz", "a bad escape"],
    [`/${"a".repeat(256)}`, "over 256 characters"],
  ])("refuses %j (%s)", (value) => {
    expect(parsePathPrefix(value)).toEqual({ error: expect.stringContaining("is not a path prefix") });
  });
});

describe("parseAnnotations", () => {
  it("reads every annotation of the original", () => {
    const { values, warnings } = parseAnnotations({
      [ANNOTATIONS.algorithm]: "leastconn",
      [ANNOTATIONS.host]: "API.example.com",
      [ANNOTATIONS.aclMatch]: "/api/",
      [ANNOTATIONS.sslTerm]: "True",
      [ANNOTATIONS.cookieSticky]: "1",
    });
    expect(warnings).toEqual([]);
    expect(values).toMatchObject({ algorithm: "leastconn", aclMatch: "/api", sslTerm: true, cookieSticky: true });
    expect(values.host).toBeDefined();
  });

  it("defaults to no settings and off switches", () => {
    expect(parseAnnotations({})).toEqual({ values: { sslTerm: false, cookieSticky: false }, warnings: [] });
  });

  it("drops each invalid value with a warning naming the annotation, and keeps the valid ones", () => {
    const { values, warnings } = parseAnnotations({
      [ANNOTATIONS.algorithm]: "static-rr\n  acl evil",
      [ANNOTATIONS.host]: "bad host",
      [ANNOTATIONS.aclMatch]: "/ok",
      [ANNOTATIONS.sslTerm]: "yes",
      [ANNOTATIONS.cookieSticky]: "true",
    });
    expect(values).toEqual({ aclMatch: "/ok", sslTerm: false, cookieSticky: true });
    expect(warnings.map((w) => w.annotation)).toEqual([ANNOTATIONS.algorithm, ANNOTATIONS.host, ANNOTATIONS.sslTerm]);
    expect(warnings[0]!.message).toContain("is not one of roundrobin");
    expect(warnings[2]!.message).toContain("is not a boolean");
    // The warning quotes the value safely: no raw newline reaches a log line.
    expect(warnings[0]!.message).not.toContain("\n");
  });

  it.each([
    ["*.com", "com"],
    ["*.CO.UK", "co.uk"],
    ["*.github.io", "github.io"],
  ])("refuses the wildcard %s over a public suffix", (host, suffix) => {
    const { values, warnings } = parseAnnotations({ [ANNOTATIONS.host]: host });
    expect(values.host).toBeUndefined();
    expect(warnings).toEqual([
      { annotation: ANNOTATIONS.host, message: expect.stringContaining(`wildcard over the public suffix ${suffix}`) },
    ]);
  });

  it("ignores annotations of other prefixes", () => {
    expect(parseAnnotations({ "lb.algorithm": "nope", "example.com/lb.host": "x y" }).warnings).toEqual([]);
  });
});
