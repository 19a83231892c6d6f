import { describe, expect, it } from "vitest";
import {
  ParsedItems,
  parseSnapshot,
  snapshotFromDocuments,
  SnapshotError,
} from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";

describe("snapshot parsing", () => {
  it("reads a kubectl JSON List and takes the highest resourceVersion", () => {
    const snap = parseSnapshot(
      JSON.stringify(
        list([service("a", [{ port: 80 }], { resourceVersion: "250" }), slice("a", [{ port: 80 }], ["10.0.0.1"])], ""),
      ),
    );
    expect(snap.services).toHaveLength(1);
    expect(snap.endpointSlices).toHaveLength(1);
    expect(snap.revision).toBe("250");
  });

  it("reads YAML, several documents and typed lists", () => {
    const text = `apiVersion: v1\nkind: ServiceList\nmetadata: {resourceVersion: "7"}\nitems:\n- metadata: {name: a}\n  spec: {ports: [{port: 80}]}\n---\nkind: EndpointSlice\napiVersion: discovery.k8s.io/v1\nmetadata: {name: a-1, labels: {kubernetes.io/service-name: a}}\naddressType: IPv4\nendpoints: []\n`;
    const snap = parseSnapshot(text);
    expect(snap.services[0]!.metadata).toMatchObject({ name: "a", namespace: "default" });
    expect(snap.endpointSlices).toHaveLength(1);
    expect(snap.revision).toBe("7");
  });

  it.each([
    ["{not json", "not valid JSON"],
    ["a: [b", "not valid YAML"],
    ['{"kind":"Pod"}', 'kind "Pod"'],
    ['{"kind":"List"}', "no items array"],
    ["[1,2]", "not a Kubernetes object"],
    ["", "empty"],
  ])("rejects %j with a clear message", (text, needle) => {
    expect(() => parseSnapshot(text)).toThrow(SnapshotError);
    expect(() => parseSnapshot(text)).toThrow(needle);
  });

  it("keeps of a slice's endpoints the first address of each ready one, after checking every address", () => {
    const endpoints = [
      { addresses: ["10.0.0.1"], conditions: { ready: true } },
      { addresses: ["10.0.0.2", "10.0.0.3"] },
      { addresses: ["10.0.0.4"], conditions: { ready: false } },
      { addresses: ["10.0.0.5"], conditions: { ready: null } },
    ];
    const snap = parseSnapshot(JSON.stringify(list([{ ...slice("a", [{ port: 80 }], []), endpoints }])));
    expect(snap.endpointSlices[0]!.readyAddresses).toEqual(["10.0.0.1", "10.0.0.2", "10.0.0.5"]);
    expect(snap.endpointSlices[0]).not.toHaveProperty("endpoints");
    const unready = [...endpoints, { addresses: ["10.0.0.6", "fd00::1"], conditions: { ready: false } }];
    const refused = parseSnapshot(JSON.stringify(list([{ ...slice("a", [{ port: 80 }], []), endpoints: unready }])));
    expect(refused.endpointSlices).toEqual([]);
    expect(refused.problems[0]).toMatch(/endpoints\.4\.addresses\.1: Invalid value/);
  });

  it("reports a malformed item and keeps the others", () => {
    const snap = parseSnapshot(
      JSON.stringify(
        list([
          { kind: "Service", metadata: { name: "x" }, spec: { ports: [{ port: 99999 }] } },
          service("ok", [{ port: 80 }]),
        ]),
      ),
    );
    expect(snap.services.map((s) => s.metadata.name)).toEqual(["ok"]);
    expect(snap.problems[0]).toMatch(/Service default\/x.*spec\.ports\.0\.port/);
  });

  it.each([
    ["web\n    http-request return status 200 string pwned if TRUE\n#", "default"],
    ["Web", "default"],
    ["web", "bad namespace"],
    ["web", "a/b"],
  ])("refuses a Service named %j in namespace %j: it is reported, never rendered", (name, namespace) => {
    const snap = parseSnapshot(
      JSON.stringify(
        list([
          { kind: "Service", metadata: { name, namespace }, spec: { ports: [{ port: 80 }] } },
          service("ok", [{ port: 80 }]),
        ]),
      ),
    );
    expect(snap.services.map((s) => s.metadata.name)).toEqual(["ok"]);
    expect(snap.problems).toHaveLength(1);
  });

  describe("what the API server refuses is refused here too: the one object is reported, the rest kept", () => {
    const ok = service("ok", [{ port: 80 }]);
    const refused = (item: unknown) => {
      const snap = parseSnapshot(JSON.stringify(list([item, ok])));
      expect(snap.services.map((s) => s.metadata.name)).toEqual(["ok"]);
      expect(snap.endpointSlices).toEqual([]);
      expect(snap.endpoints).toEqual([]);
      expect(snap.problems).toHaveLength(1);
      return snap.problems[0]!;
    };
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
      const snap = parseSnapshot(
        JSON.stringify(
          list([
            svc([
              { name: "dns", port: 53 },
              { name: "dns-udp", port: 53, protocol: "UDP" },
            ]),
          ]),
        ),
      );
      expect(snap.problems).toEqual([]);
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

    it("a second object of one kind, namespace and name", () => {
      const snap = parseSnapshot(
        JSON.stringify(list([service("web", [{ port: 80 }]), service("web", [{ port: 8080 }]), ok])),
      );
      expect(snap.services.map((s) => `${s.metadata.name}:${s.spec.ports[0]!.port}`)).toEqual(["web:80", "ok:80"]);
      expect(snap.problems).toEqual([expect.stringMatching(/^Service default\/web: Duplicate value/)]);
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
      const snap = parseSnapshot(
        JSON.stringify(list([{ ...svc([{ port: 80 }]), metadata: { name: "web", creationTimestamp } }])),
      );
      expect(snap.problems).toEqual([]);
      expect(snap.services[0]!.metadata.creationTimestamp).toBe(creationTimestamp);
    });
  });

  it("refuses a YAML alias bomb with a clear error", () => {
    const bomb = [
      "a: &a [x, x, x, x, x, x, x, x, x]",
      ...Array.from(
        { length: 8 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9)
            .fill(`*${String.fromCharCode(97 + i)}`)
            .join(", ")}]`,
      ),
      "kind: List",
      "items: []",
    ].join("\n");
    expect(() => parseSnapshot(bomb)).toThrow(SnapshotError);
  });

  describe("a warm instance's validated items (live lists)", () => {
    const web = (rv: string, ip = "10.0.0.1") => slice("web", [{ port: 80 }], [ip], { resourceVersion: rv });
    const api = service("api", [{ port: 80 }], { resourceVersion: "3" });

    it("reuses an item listed again with the same resourceVersion and validates a changed one", () => {
      const reuse = new ParsedItems();
      const first = snapshotFromDocuments([list([api, web("5")])], reuse);
      const again = snapshotFromDocuments([list([api, web("5")])], reuse);
      expect(again.services[0]).toBe(first.services[0]);
      expect(again.endpointSlices[0]).toBe(first.endpointSlices[0]);
      const moved = snapshotFromDocuments([list([api, web("6", "10.0.0.2")])], reuse);
      expect(moved.endpointSlices[0]).not.toBe(first.endpointSlices[0]);
      expect(moved.endpointSlices[0]!.readyAddresses).toEqual(["10.0.0.2"]);
      expect(moved.services[0]).toBe(first.services[0]);
    });

    it("forgets items a list no longer returns, and never keeps invalid or unversioned ones", () => {
      const reuse = new ParsedItems();
      const first = snapshotFromDocuments([list([api, web("5")])], reuse);
      snapshotFromDocuments([list([web("5")])], reuse);
      expect(snapshotFromDocuments([list([api, web("5")])], reuse).services[0]).not.toBe(first.services[0]);
      const bad = { ...service("bad", [{ port: 99999 }], { resourceVersion: "8" }) };
      for (let i = 0; i < 2; i++) expect(snapshotFromDocuments([list([bad])], reuse).problems).toHaveLength(1);
      const unversioned = service("plain", [{ port: 80 }]);
      delete (unversioned.metadata as { resourceVersion?: string }).resourceVersion;
      const a = snapshotFromDocuments([list([unversioned])], reuse).services[0];
      expect(snapshotFromDocuments([list([unversioned])], reuse).services[0]).not.toBe(a);
    });
  });
});
