import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import * as crypto from "node:crypto";
import { bearerToken, tokenMatches, tokenSource } from "../../../shared/agent/token.js";

vi.mock("node:crypto", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:crypto")>();
  return { ...real, timingSafeEqual: vi.fn(real.timingSafeEqual) };
});

describe("bearerToken", () => {
  it("takes the token of a Bearer header, case-insensitively, and nothing else", () => {
    expect(bearerToken("Bearer abc.def-123")).toBe("abc.def-123");
    expect(bearerToken("bearer abc")).toBe("abc");
    expect(bearerToken("Bearer  abc ")).toBe("abc");
    expect(bearerToken(undefined)).toBeUndefined();
    expect(bearerToken("")).toBeUndefined();
    expect(bearerToken("Basic abc")).toBeUndefined();
    expect(bearerToken("Bearer")).toBeUndefined();
    expect(bearerToken("Bearer a b")).toBeUndefined();
  });
});

describe("tokenMatches", () => {
  it("accepts exactly the expected token", () => {
    expect(tokenMatches("s3cret", "s3cret")).toBe(true);
    expect(tokenMatches("s3cret ", "s3cret")).toBe(false);
    expect(tokenMatches("s3cre", "s3cret")).toBe(false);
    expect(tokenMatches("S3CRET", "s3cret")).toBe(false);
    expect(tokenMatches("", "s3cret")).toBe(false);
    expect(tokenMatches(undefined, "s3cret")).toBe(false);
  });

  it("never accepts anything when no token is configured", () => {
    expect(tokenMatches("", "")).toBe(false);
    expect(tokenMatches(undefined, "")).toBe(false);
  });

  it("compares in constant time on equal-length buffers, whatever the lengths given", () => {
    const spy = vi.mocked(crypto.timingSafeEqual);
    spy.mockClear();
    tokenMatches("x", "a-much-longer-expected-token");
    tokenMatches("a-much-longer-given-token-than-expected", "y");
    expect(spy).toHaveBeenCalledTimes(2);
    for (const [a, b] of spy.mock.calls) {
      expect((a as Buffer).length).toBe(32);
      expect((b as Buffer).length).toBe(32);
    }
  });
});

describe("tokenSource", () => {
  it("reads the file at every call (rotation) without its trailing newline, or returns the fixed token", async () => {
    const dir = mkdtempSync(join(tmpdir(), "token-"));
    try {
      const file = join(dir, "token");
      writeFileSync(file, "first\n");
      const read = tokenSource({ file, token: "ignored" });
      expect(await read()).toBe("first");
      writeFileSync(file, "second");
      expect(await read()).toBe("second");
      expect(await tokenSource({ token: "fixed" })()).toBe("fixed");
      expect(() => tokenSource({})).toThrow(/required/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
