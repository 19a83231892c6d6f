import { describe, expect, it } from "vitest";
import { exporterOf } from "../../../../shared/core/haproxy-config/exporter.js";

const config = (bind: string, use = "http-request use-service prometheus-exporter if { path /metrics }") =>
  [
    "global",
    "    stats socket /run/admin.sock",
    "",
    "listen stats from http_defaults",
    `    bind ${bind}`,
    "    # the exporter",
    `    ${use}`,
    "    stats enable",
    "",
    "frontend http from http_defaults",
    "    bind 0.0.0.0:80",
    "",
  ].join("\n");

describe("exporterOf", () => {
  it("reads the exporter's bind and path from the section serving it", () => {
    expect(exporterOf(config("127.0.0.1:1936"), {})).toEqual({ host: "127.0.0.1", port: 1936, path: "/metrics" });
    expect(exporterOf(config("10.0.0.5:9000 name stats"), {})).toEqual({
      host: "10.0.0.5",
      port: 9000,
      path: "/metrics",
    });
    expect(exporterOf(config("[fd00::5]:1936"), {})?.host).toBe("[fd00::5]");
  });

  it("asks an address of every interface on loopback", () => {
    for (const any of ["0.0.0.0", "*", ""]) expect(exporterOf(config(`${any}:1936`), {})?.host).toBe("127.0.0.1");
    expect(exporterOf(config("[::]:1936"), {})?.host).toBe("[::1]");
  });

  it("takes the condition's path, or /metrics for an exporter on every path", () => {
    expect(
      exporterOf(config("127.0.0.1:1936", "http-request use-service prometheus-exporter if { path /prom }"), {})?.path,
    ).toBe("/prom");
    expect(exporterOf(config("127.0.0.1:1936", "http-request use-service prometheus-exporter"), {})?.path).toBe(
      "/metrics",
    );
  });

  it("reads an address HAProxy takes from its environment as it does", () => {
    const env = { SERVICELB_NODE_ADDRESS: "127.0.0.3" };
    expect(exporterOf(config('"${SERVICELB_NODE_ADDRESS}":8404'), env)).toEqual({
      host: "127.0.0.3",
      port: 8404,
      path: "/metrics",
    });
    // Unset, HAProxy makes it empty: every interface, asked on loopback.
    expect(exporterOf(config('"${SERVICELB_NODE_ADDRESS}":8404'), {})?.host).toBe("127.0.0.1");
    expect(
      exporterOf(config('"${SERVICELB_NODE_ADDRESS}":8404'), { SERVICELB_NODE_ADDRESS: "node-a" }),
    ).toBeUndefined();
  });

  it("finds none where it cannot tell the exporter's address or path", () => {
    expect(exporterOf(config("127.0.0.1:1936", "stats enable"), {})).toBeUndefined();
    // Not the next section's bind (0.0.0.0:80) either.
    expect(exporterOf(config("unix@/run/stats.sock"), {})).toBeUndefined();
    expect(exporterOf(config("127.0.0.1:99999"), {})).toBeUndefined();
    expect(
      exporterOf(config("127.0.0.1:1936", "http-request use-service prometheus-exporter if { path_beg /m }"), {}),
    ).toBeUndefined();
    // Nor a line of the file section (comments).
    expect(exporterOf("#> maps/x\n#|    http-request use-service prometheus-exporter\n", {})).toBeUndefined();
  });
});
