import { describe, expect, it } from "vitest";
import { optionSpecs, parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { flagName } from "../../../../shared/core/settings/settings.js";

// Every value error names the flag and the form it expects (issue 31: `--http-port 80a` answered
// "Invalid input: expected number, received NaN"), never zod's generic wording alone.

/** The message for `value` as `key`'s flag, or null when the option accepts it. */
function messageFor(key: string, value: string): string | null {
  try {
    parseRenderOptions({ [key]: value });
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

describe("render option value errors", () => {
  const refused = Object.keys(optionSpecs)
    .map((key) => ({ key, message: messageFor(key, "80a;x") }))
    .filter((r): r is { key: string; message: string } => r.message !== null);

  it("cover the numbers, ports, durations and choices", () => {
    expect(refused.map((r) => r.key)).toEqual(
      expect.arrayContaining(["httpPort", "statsPort", "hstsMaxAge", "rateLimitRps", "defaultReturnCode"]),
    );
  });

  it.each(Object.keys(optionSpecs))("%s: names its flag and the expected form", (key) => {
    const message = refused.find((r) => r.key === key)?.message;
    if (message === undefined) return;
    expect(message.startsWith(`--${flagName(key)}: `), message).toBe(true);
    expect(message).not.toMatch(/Invalid input|received NaN|expected number/);
  });

  it("says what a port is: --http-port 80a", () => {
    expect(messageFor("httpPort", "80a")).toBe("--http-port: a port number from 1 to 65535");
  });
});
