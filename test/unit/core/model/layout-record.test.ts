import { describe, expect, it } from "vitest";
import { type BackendLayout, backendLayoutSchema, layoutDigest } from "../../../../shared/core/model/layout-record.js";

const layout: BackendLayout = {
  version: 1,
  spareSlots: 4,
  named: ["default_api_80", "default_web_80"],
  slots: [2, 8],
  hashSlots: { default_web_80: 4 },
  spares: [
    { name: "spare_1", holds: "default_shop_80" },
    { name: "spare_2", holds: null },
  ],
  vacated: [
    {
      name: "default_old_80",
      namespace: "default",
      service: "old",
      servicePort: 80,
      slots: 2,
      strip: { prefix: "/old", unlessHost: { name: "old.example.com", wildcard: false } },
    },
  ],
};

describe("the backend layout record", () => {
  it("reads back as written, under the same digest", () => {
    const read = backendLayoutSchema.parse(JSON.parse(JSON.stringify(layout)));
    expect(read).toEqual(layout);
    expect(layoutDigest(read)).toBe(layoutDigest(layout));
    expect(layoutDigest(layout)).toMatch(/^[0-9a-f]{16}$/);
  });

  it("names another record by another digest", () => {
    expect(layoutDigest({ ...layout, spareSlots: 5 })).not.toBe(layoutDigest(layout));
  });

  it.each([
    ["a spare not named spare_<n>", { spares: [{ name: "backup", holds: null }] }],
    ["a backend name that could carry config text", { named: ["web\nbackend x"] }],
    ["a record of another version", { version: 2 }],
  ])("refuses %s", (_, change) => {
    expect(backendLayoutSchema.safeParse({ ...layout, ...change }).success).toBe(false);
  });
});
