import { describe, expect, it } from "vitest";
import { EndpointIndex, formatAddress } from "../../../../shared/core/kubernetes/endpoints.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import type { Service } from "../../../../shared/core/kubernetes/snapshot-schemas.js";
import { list, service, slice } from "../../../support/fixtures.js";

describe("formatAddress", () => {
  it("writes IPv4 as ip:port and IPv6 in brackets", () => {
    expect(formatAddress("10.0.0.1", 8080)).toBe("10.0.0.1:8080");
    expect(formatAddress("fd00::1", 80)).toBe("[fd00::1]:80");
  });

  it("refuses the unspecified addresses (HAProxy would send to the client's destination) and non-addresses", () => {
    for (const ip of ["0.0.0.0", "::", "pod.example", "10.0.0.1:80", ""]) expect(formatAddress(ip, 80)).toBeNull();
  });
});

function index(items: unknown[]): { idx: EndpointIndex; svc: (name: string, ns?: string) => Service } {
  const snapshot = snapshotFromDocuments([list(items)]);
  return {
    idx: new EndpointIndex(snapshot),
    svc: (name, ns = "default") =>
      snapshot.services.find((s) => s.metadata.name === name && s.metadata.namespace === ns)!,
  };
}

describe("EndpointIndex.addresses", () => {
  const http = { port: 80, name: "http", targetPort: "http" };

  it("joins a Service's slices, matching the endpoint port by the Service port's name, ready endpoints only", () => {
    const { idx, svc } = index([
      service("web", [http]),
      slice("web", [{ name: "http", port: 8080 }], ["10.0.0.2", { ip: "10.0.0.9", ready: false }], { name: "a" }),
      slice("web", [{ name: "http", port: 8080 }], ["10.0.0.1", "10.0.0.2"], { name: "b" }),
      slice("web", [{ name: "metrics", port: 9090 }], ["10.0.0.3"], { name: "c" }),
    ]);
    const web = svc("web");
    expect(idx.addresses(web, web.spec.ports[0]!)).toEqual(["10.0.0.1:8080", "10.0.0.2:8080"]);
  });

  it("keeps namespaces apart and ignores slices of other Services", () => {
    const { idx, svc } = index([
      service("web", [http]),
      service("web", [http], { namespace: "shop" }),
      slice("web", [{ name: "http", port: 8080 }], ["10.0.0.1"]),
      slice("web", [{ name: "http", port: 8080 }], ["10.1.0.1"], { namespace: "shop" }),
      slice("api", [{ name: "http", port: 8080 }], ["10.2.0.1"]),
    ]);
    const shop = svc("web", "shop");
    expect(idx.addresses(shop, shop.spec.ports[0]!)).toEqual(["10.1.0.1:8080"]);
    const def = svc("web");
    expect(idx.addresses(def, def.spec.ports[0]!)).toEqual(["10.0.0.1:8080"]);
  });

  it("brackets IPv6 slices and skips FQDN slices", () => {
    const { idx, svc } = index([
      service("web", [http]),
      slice("web", [{ name: "http", port: 8080 }], ["fd00::2"], { name: "v6", addressType: "IPv6" }),
      slice("web", [{ name: "http", port: 8080 }], ["pod.example"], { name: "fqdn", addressType: "FQDN" }),
    ]);
    const web = svc("web");
    expect(idx.addresses(web, web.spec.ports[0]!)).toEqual(["[fd00::2]:8080"]);
  });

  it("falls back to v1 Endpoints when a Service has no slices", () => {
    const { idx, svc } = index([
      service("web", [http]),
      {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: { name: "web", namespace: "default", resourceVersion: "1" },
        subsets: [{ addresses: [{ ip: "10.0.0.5" }], ports: [{ name: "http", port: 8080, protocol: "TCP" }] }],
      },
    ]);
    const web = svc("web");
    expect(idx.addresses(web, web.spec.ports[0]!)).toEqual(["10.0.0.5:8080"]);
  });

  it("answers no addresses for a Service without endpoints", () => {
    const { idx, svc } = index([service("web", [http])]);
    const web = svc("web");
    expect(idx.sourceOf(web)).toBeUndefined();
    expect(idx.addresses(web, web.spec.ports[0]!)).toEqual([]);
  });
});
