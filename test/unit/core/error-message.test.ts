import { describe, expect, it } from "vitest";
import { errorMessage } from "../../../shared/core/error-message.js";

describe("errorMessage", () => {
  it("gives an Error's message, whatever its class", () => {
    expect(errorMessage(new Error("no such file"))).toBe("no such file");
    expect(errorMessage(new TypeError("not a function"))).toBe("not a function");
  });

  it("gives anything else thrown as text", () => {
    expect(errorMessage("plain string")).toBe("plain string");
    expect(errorMessage(42)).toBe("42");
    expect(errorMessage(undefined)).toBe("undefined");
    expect(errorMessage({ code: "E" })).toBe("[object Object]");
  });
});
