import { describe, expect, it } from "vitest";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { settingsRecord, settingsRecordSchema } from "../../../../shared/core/settings/settings-record.js";

describe("settings recorded with a config", () => {
  it("hold the per-frontend flags in their input form: parsing the record gives the options back", () => {
    const options = parseRenderOptions({
      acceptProxy: "10.0.0.0/8, fd00::/8",
      timeoutServer: "30s",
      timeoutQueue: "2s",
      sslCert: "/etc/haproxy/certs",
    });
    const record = settingsRecord(options, { source: "built-in", sha256: "0".repeat(64) });
    expect(settingsRecordSchema.safeParse(record).success).toBe(true);
    expect(record.options.acceptProxy).toBe("10.0.0.0/8,fd00::/8");
    expect(parseRenderOptions(record.options)).toEqual(options);
  });

  it("hold --host-claims as the JSON text a flag takes: parsing the record gives the map back", () => {
    const options = parseRenderOptions({
      hostClaims: { shop: ["shop.example.com", "*.shop.example.com"], blog: ["blog.example.com"] },
    });
    const record = settingsRecord(options, { source: "built-in", sha256: "0".repeat(64) });
    expect(settingsRecordSchema.safeParse(record).success).toBe(true);
    expect(parseRenderOptions(record.options)).toEqual(options);
  });

  it("hold --own-hosts as the comma list a flag takes", () => {
    const options = parseRenderOptions({ ownHosts: "LB.example.com, *.nodes.example.com" });
    const record = settingsRecord(options, { source: "built-in", sha256: "0".repeat(64) });
    expect(record.options.ownHosts).toBe("lb.example.com,*.nodes.example.com");
    expect(parseRenderOptions(record.options)).toEqual(options);
  });
});
