import { describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  endpointSliceSchema,
  endpointsSchema,
  serviceSchema,
} from "../../../../shared/core/kubernetes/snapshot-schemas.js";
import { slice } from "../../../support/fixtures.js";

const SCHEMAS: Record<string, z.ZodType> = {
  Service: serviceSchema,
  EndpointSlice: endpointSliceSchema,
  Endpoints: endpointsSchema,
};

/** Why the schema of the object's kind refuses it, as `path: message`. */
function refused(item: Record<string, unknown>): string {
  const parsed = SCHEMAS[String(item.kind)]!.safeParse(item);
  if (parsed.success) throw new Error(`${String(item.kind)} was accepted`);
  const issue = parsed.error.issues[0]!;
  return `${issue.path.join(".")}: ${issue.message}`;
}

describe("the objects a snapshot keeps", () => {
  it("keeps of a slice's endpoints the first address of each ready one, after checking every address", () => {
    const endpoints = [
      { addresses: ["10.0.0.1"], conditions: { ready: true } },
      { addresses: ["10.0.0.2", "10.0.0.3"] },
      { addresses: ["10.0.0.4"], conditions: { ready: false } },
      { addresses: ["10.0.0.5"], conditions: { ready: null } },
    ];
    const kept = endpointSliceSchema.parse({ ...slice("a", [{ port: 80 }], []), endpoints });
    expect(kept.readyAddresses).toEqual(["10.0.0.1", "10.0.0.2", "10.0.0.5"]);
    expect(kept).not.toHaveProperty("endpoints");
    const unready = [...endpoints, { addresses: ["10.0.0.6", "fd00::1"], conditions: { ready: false } }];
    expect(refused({ ...slice("a", [{ port: 80 }], []), endpoints: unready })).toMatch(
      /endpoints\.4\.addresses\.1: Invalid value/,
    );
  });

  describe("what the API server refuses is refused here too", () => {
    const svc = (ports: unknown[], spec: Record<string, unknown> = {}) => ({
      kind: "Service",
      metadata: { name: "web" },
      spec: { ports, ...spec },
    });

    it.each([
      [
        "two ports with one port number",
        [
          { name: "a", port: 80 },
          { name: "b", port: 80 },
        ],
        /spec\.ports\.1: Duplicate value: port 80, protocol TCP/,
      ],
      [
        "a multi-port Service with unnamed ports",
        [{ port: 80 }, { port: 443 }],
        /spec\.ports\.0\.name: Required value/,
      ],
      [
        "two ports with one name",
        [
          { name: "a", port: 80 },
          { name: "a", port: 81 },
        ],
        /spec\.ports\.1\.name: Duplicate value/,
      ],
      ["a port name that is not a DNS label", [{ name: "Web_1", port: 80 }], /spec\.ports\.0\.name: Invalid value/],
      ["an unknown protocol", [{ port: 80, protocol: "tcp" }], /spec\.ports\.0\.protocol: Unsupported value: "tcp"/],
      [
        "a named targetPort that is not a port name",
        [{ port: 80, targetPort: "http port" }],
        /targetPort: Invalid value/,
      ],
    ])("a Service with %s", (_, ports, message) => {
      expect(refused(svc(ports))).toMatch(message);
    });

    it("keeps the same port number under two protocols, as the API server does", () => {
      const ports = [
        { name: "dns", port: 53 },
        { name: "dns-udp", port: 53, protocol: "UDP" },
      ];
      expect(serviceSchema.safeParse(svc(ports)).success).toBe(true);
    });

    it.each([
      [{ type: "Loadbalancer" }, /spec\.type: Unsupported value/],
      [{ clusterIP: "fe80::1%eth0" }, /spec\.clusterIP: Invalid value/],
      [{ clusterIP: "10.96.0.010" }, /spec\.clusterIP: Invalid value/],
      [{ sessionAffinity: "Cookie" }, /spec\.sessionAffinity: Unsupported value/],
    ])("a Service with spec %j", (spec, message) => {
      expect(refused(svc([{ port: 80 }], spec))).toMatch(message);
    });

    it.each([
      ["IPv6", "fe80::1%eth0", /must be a valid IPv6 address/],
      ["IPv6", "::ffff:10.0.0.1", /IPv4-mapped/],
      ["IPv6", "10.0.0.1", /must be a valid IPv6 address/],
      ["IPv4", "10.0.0.01", /must be a valid IPv4 address/],
      ["IPv4", "fd00::1", /must be a valid IPv4 address/],
    ])("an %s EndpointSlice with the address %j", (addressType, ip, message) => {
      expect(refused(slice("web", [{ port: 80 }], [ip], { addressType }))).toMatch(message);
    });

    it.each([
      ["an unknown address type", { addressType: "IP" }, /addressType: Unsupported value/],
      ["an endpoint without addresses", { endpoints: [{ addresses: [] }] }, /endpoints\.0\.addresses: Required value/],
      [
        "two ports with one name",
        {
          ports: [
            { name: "a", port: 1 },
            { name: "a", port: 2 },
          ],
        },
        /ports\.1\.name: Duplicate value/,
      ],
    ])("an EndpointSlice with %s", (_, fields, message) => {
      expect(refused({ ...slice("web", [{ port: 80 }], ["10.0.0.1"]), ...fields })).toMatch(message);
    });

    it.each([
      ["the address fe80::1%eth0", { addresses: [{ ip: "fe80::1%eth0" }], ports: [{ port: 80 }] }, /ip: Invalid value/],
      [
        "two unnamed ports",
        { addresses: [{ ip: "10.0.0.1" }], ports: [{ port: 80 }, { port: 81 }] },
        /name: Required value/,
      ],
      ["a port without a number", { addresses: [{ ip: "10.0.0.1" }], ports: [{ name: "a" }] }, /port: Required value/],
    ])("v1 Endpoints with %s", (_, subset, message) => {
      expect(refused({ kind: "Endpoints", metadata: { name: "web" }, subsets: [subset] })).toMatch(message);
    });

    it("a creationTimestamp that is not an RFC 3339 time", () => {
      expect(refused({ ...svc([{ port: 80 }]), metadata: { name: "web", creationTimestamp: "yesterday" } })).toMatch(
        /creationTimestamp/,
      );
    });

    // As Go's time.Parse(time.RFC3339, …) behind metav1.Time refuses them.
    it.each([
      ["2019-13-45T25:61:61Z", "month out of range"],
      ["2019-00-10T00:00:00Z", "month out of range"],
      ["2019-02-29T00:00:00Z", "day out of range"],
      ["2100-02-29T00:00:00Z", "day out of range"],
      ["2019-04-31T00:00:00Z", "day out of range"],
      ["2019-01-00T00:00:00Z", "day out of range"],
      ["2019-01-01T24:00:00Z", "hour out of range"],
      ["2019-01-01T23:60:00Z", "minute out of range"],
      ["2019-01-01T23:59:60Z", "second out of range"],
      ["2019-01-01T00:00:00+24:00", "time zone offset hour out of range"],
      ["2019-01-01T00:00:00-05:60", "time zone offset minute out of range"],
      ["2019-01-01t00:00:00z", "an RFC 3339 time"],
      ["2019-01-01T00:00:00.Z", "an RFC 3339 time"],
    ])("a creationTimestamp of %s: %s", (creationTimestamp, reason) => {
      expect(refused({ ...svc([{ port: 80 }]), metadata: { name: "web", creationTimestamp } })).toMatch(
        new RegExp(`metadata\\.creationTimestamp: .*${reason}`),
      );
    });

    it.each([
      "2020-02-29T23:59:59Z",
      "2000-02-29T00:00:00Z",
      "2019-12-31T23:59:59.123456789Z",
      "2019-01-01T00:00:00.1234567891+05:30",
      "2019-01-01T00:00:00-23:59",
      "0000-01-01T00:00:00Z",
    ])("accepts the creationTimestamp %s", (creationTimestamp) => {
      const kept = serviceSchema.parse({ ...svc([{ port: 80 }]), metadata: { name: "web", creationTimestamp } });
      expect(kept.metadata.creationTimestamp).toBe(creationTimestamp);
    });
  });
});
