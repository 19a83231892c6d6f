import { describe, expect, it } from "vitest";
import { notifySchema } from "../../../shared/agent/http-api.js";
import { formatConfigName } from "../../../shared/core/publish/config-key.js";
import { sha256 } from "../../../shared/core/publish/sha256.js";

const sha = sha256("config");
const key = `lb/configs/${formatConfigName({ epoch: 1, revision: 12345n, seq: 0, shaPrefix: sha.slice(0, 16) })}`;

describe("the body of POST /notify", () => {
  it("is a config key of the store's format, the config's sha256 and its revision", () => {
    expect(notifySchema.parse({ key, sha256: sha, revision: "12345" })).toEqual({
      key,
      sha256: sha,
      revision: "12345",
    });
    // A config published by its tree digest (core/publish/config-digest.ts).
    expect(notifySchema.parse({ key, sha256: `tree1:${sha}`, revision: "12345" }).sha256).toBe(`tree1:${sha}`);
  });

  it.each([
    [{ key: "lb/configs/latest.cfg" }, "key"],
    [{ key: `${key} ` }, "key"],
    [{ sha256: sha.slice(1) }, "sha256"],
    [{ sha256: sha.toUpperCase() }, "sha256"],
    [{ sha256: `tree2:${sha}` }, "sha256"],
    [{ sha256: `tree1:${sha.slice(1)}` }, "sha256"],
    [{ revision: "1".repeat(21) }, "revision"],
    [{ revision: "-1" }, "revision"],
  ])("refuses %j", (change, field) => {
    const result = notifySchema.safeParse({ key, sha256: sha, revision: "12345", ...change });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual([field]);
  });
});
