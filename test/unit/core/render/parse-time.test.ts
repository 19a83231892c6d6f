import { describe, expect, it } from "vitest";
import { PARSE_MS_PER_MIB, parseTimeoutMs } from "../../../../shared/core/render/parse-time.js";

describe("parseTimeoutMs", () => {
  it("is the setting for a config that parses well within it", () => {
    expect(parseTimeoutMs(600 * 1024, 30_000)).toBe(30_000);
  });

  it("grows with the config past the setting: a 30 MiB config (50,000 Services) gets a minute", () => {
    expect(parseTimeoutMs(30 * 2 ** 20, 30_000)).toBe(30 * PARSE_MS_PER_MIB);
    expect(parseTimeoutMs(30 * 2 ** 20, 15_000)).toBe(60_000);
  });

  it("never goes below the setting, however small the config", () => {
    expect(parseTimeoutMs(0, 1000)).toBe(1000);
  });
});
