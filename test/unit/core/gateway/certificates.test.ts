import { describe, expect, it } from "vitest";
import { assumedCertificates, type HeldCertificates } from "../../../../shared/core/gateway/certificates.js";
import { MAX_PORT_CERTIFICATES } from "../../../../shared/core/gateway/listeners.js";
import { type GatewayPorts, resolveGateway } from "../../../../shared/core/gateway/resolve.js";
import type { GatewayRouting } from "../../../../shared/core/gateway/routing.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";
import {
  gateway,
  gatewayClass,
  httpRoute,
  type ListenerSpec,
  referenceGrant,
} from "../../../support/gateway-fixtures.js";

const held = (...nodes: Array<[string, string[] | null]>): HeldCertificates => ({
  holders: nodes.map(([node, certificates]) => ({ name: `node ${node}`, certificates })),
  unknown: "no node has reported the certificates it holds yet",
});
const BOTH = held(["a", ["default/site", "certs/shared"]], ["b", ["default/site", "certs/shared"]]);

function resolve(items: unknown[], certificates?: HeldCertificates): GatewayRouting {
  const ports: GatewayPorts = {
    httpPort: 80,
    reserved: new Map([[1936, "the stats page's"]]),
    ...(certificates ? { certificates } : {}),
  };
  const snap = snapshotFromDocuments([list(items)]);
  expect(snap.problems).toEqual([]);
  const r = resolveGateway(snap, ports);
  if (!r) throw new Error("no gateway objects");
  return r;
}

const https = (name: string, refs: unknown[], extra: Partial<ListenerSpec> = {}): ListenerSpec => ({
  name,
  port: 8443,
  protocol: "HTTPS",
  tls: { certificateRefs: refs },
  ...extra,
});
const secret = (name: string, namespace?: string) => ({ kind: "Secret", name, ...(namespace ? { namespace } : {}) });
const backend = [
  service("v1", [{ port: 8080, name: "http" }]),
  slice("v1", [{ name: "http", port: 9001 }], ["10.0.0.1"]),
];
const route = httpRoute("r", {
  parentRefs: [{ name: "gw" }],
  hostnames: ["site.example.com"],
  rules: [{ backendRefs: [{ name: "v1", port: 8080 }] }],
});

/** Each listener's conditions other than a pending Programmed, as `Type Status Reason`. */
function listeners(r: GatewayRouting): Record<string, string[]> {
  return Object.fromEntries(
    r.status.gateways[0]!.listeners.map((l) => [
      l.name,
      l.conditions.filter((c) => c.status !== "Unknown").map((c) => `${c.type} ${c.status} ${c.reason}`),
    ]),
  );
}
const message = (r: GatewayRouting, listener: string, type: string) =>
  r.status.gateways[0]!.listeners.find((l) => l.name === listener)!.conditions.find((c) => c.type === type)!.message;

describe("HTTPS listeners", () => {
  it("bind the certificate every node holds and take routes (HTTPSListener)", () => {
    const r = resolve([gatewayClass(), gateway("gw", [https("https", [secret("site")])]), route, ...backend], BOTH);
    expect(listeners(r).https).toEqual([
      "Accepted True Accepted",
      "ResolvedRefs True ResolvedRefs",
      "Conflicted False NoConflicts",
    ]);
    expect(r.status.gateways[0]!.listeners[0]!.attachedRoutes).toBe(1);
    expect(r.frontends).toMatchObject([{ port: 8443, shared: false, certificates: ["default/site"] }]);
    expect(r.frontends[0]!.entries.map((e) => e.host?.name)).toEqual(["site.example.com"]);
  });

  it("refuse a certificate a node lacks, naming the node, and serve nothing without one (GatewayInvalidTLSConfiguration)", () => {
    const partial = held(["a", ["default/site"]], ["b", []], ["c", null]);
    const r = resolve([gatewayClass(), gateway("gw", [https("https", [secret("site")])]), route, ...backend], partial);
    expect(listeners(r).https).toEqual([
      "Accepted True Accepted",
      "ResolvedRefs False InvalidCertificateRef",
      "Conflicted False NoConflicts",
      "Programmed False Invalid",
    ]);
    expect(message(r, "https", "ResolvedRefs")).toBe(
      "certificate default/site (default/site.pem): not held by node b, node c (no --gateway-cert-dir) (2 of 3)",
    );
    expect(r.status.gateways[0]!.listeners[0]!.attachedRoutes).toBe(0);
    expect(r.status.httpRoutes[0]!.parents[0]!.conditions[0]).toMatchObject({
      reason: "NotAllowedByListeners",
      message:
        "no listener of Gateway default/gw allows this route (not served: https; see the Gateway's listener status)",
    });
    expect(r.status.gateways[0]!.conditions[0]).toMatchObject({ status: "False", reason: "ListenersNotValid" });
    expect(r.frontends).toEqual([]);
    expect(r.warnings).toContain(
      "Gateway default/gw listener https: certificate default/site (default/site.pem): not held by node b, node c (no --gateway-cert-dir) (2 of 3)",
    );
  });

  it("say when no node has reported the certificates it holds", () => {
    const r = resolve([gatewayClass(), gateway("gw", [https("https", [secret("site")])])]);
    expect(listeners(r).https).toContain("ResolvedRefs False InvalidCertificateRef");
    expect(message(r, "https", "ResolvedRefs")).toContain("no node has reported the certificates it holds yet");
  });

  it("refuse references that are not core Secrets, and a listener without any", () => {
    const r = resolve(
      [
        gatewayClass(),
        gateway("gw", [
          https("group", [{ group: "wrong.group.company.io", kind: "Secret", name: "site" }]),
          https("kind", [{ kind: "ConfigMap", name: "site" }], { port: 8444 }),
          { name: "none", port: 8445, protocol: "HTTPS" },
        ]),
      ],
      BOTH,
    );
    for (const name of ["group", "kind", "none"])
      expect(listeners(r)[name]).toContain("ResolvedRefs False InvalidCertificateRef");
    expect(message(r, "kind", "ResolvedRefs")).toContain("kind ConfigMap is not supported (Secret only)");
    expect(message(r, "none", "ResolvedRefs")).toBe("an HTTPS listener needs tls.certificateRefs");
  });

  it("need a ReferenceGrant from Gateways for a Secret of another namespace, held or not (GatewaySecretMissingReferenceGrant)", () => {
    const gw = gateway("gw", [
      https("https", [secret("shared", "certs")]),
      https("https-nonexistent-secret", [secret("absent", "certs")], { hostname: "other.example.com" }),
    ]);
    const r = resolve([gatewayClass(), gw, route, ...backend], BOTH);
    expect(listeners(r).https).toContain("ResolvedRefs False RefNotPermitted");
    expect(listeners(r)["https-nonexistent-secret"]).toContain("ResolvedRefs False RefNotPermitted");
    expect(message(r, "https", "ResolvedRefs")).toBe(
      "certificateRef certs/shared: no ReferenceGrant in namespace certs lets Gateways of default refer to Secret shared",
    );
    // A grant for HTTPRoutes, or to Services, is no grant for Gateways to Secrets.
    const wrong = resolve(
      [
        gatewayClass(),
        gw,
        referenceGrant("routes", "certs", { namespace: "default" }, { kind: "Secret" }),
        referenceGrant("services", "certs", { namespace: "default", kind: "Gateway" }),
      ],
      BOTH,
    );
    expect(listeners(wrong).https).toContain("ResolvedRefs False RefNotPermitted");
  });

  it("take a Secret of another namespace with a grant, to it or to every Secret there (GatewaySecretReferenceGrantSpecific, AllInNamespace)", () => {
    for (const to of [{ kind: "Secret", name: "shared" }, { kind: "Secret" }]) {
      const r = resolve(
        [
          gatewayClass(),
          gateway("gw", [https("https", [secret("shared", "certs")])]),
          referenceGrant("gateways", "certs", { namespace: "default", kind: "Gateway" }, to),
          route,
          ...backend,
        ],
        BOTH,
      );
      expect(listeners(r).https).toContain("ResolvedRefs True ResolvedRefs");
      expect(r.frontends[0]!.certificates).toEqual(["certs/shared"]);
    }
    const other = resolve(
      [
        gatewayClass(),
        gateway("gw", [https("https", [secret("shared", "certs")])]),
        referenceGrant(
          "gateways",
          "certs",
          { namespace: "default", kind: "Gateway" },
          { kind: "Secret", name: "else" },
        ),
      ],
      BOTH,
    );
    expect(listeners(other).https).toContain("ResolvedRefs False RefNotPermitted");
  });

  it("serve the certificates that resolve when others do not, and say which do not", () => {
    const r = resolve(
      [gatewayClass(), gateway("gw", [https("https", [secret("missing"), secret("site")])]), route, ...backend],
      BOTH,
    );
    expect(listeners(r).https).toEqual([
      "Accepted True Accepted",
      "ResolvedRefs False InvalidCertificateRef",
      "Conflicted False NoConflicts",
    ]);
    expect(message(r, "https", "ResolvedRefs")).toBe(
      "certificate default/missing (default/missing.pem): not held by node a, node b (2 of 2) (served with default/site)",
    );
    expect(r.frontends[0]!.certificates).toEqual(["default/site"]);
  });

  it("bind every certificate of a port's listeners, across Gateways, once each", () => {
    const r = resolve(
      [
        gatewayClass(),
        gateway("gw", [https("https", [secret("site")], { hostname: "site.example.com" })]),
        gateway("gw2", [https("https", [secret("site"), secret("shared", "certs")], { hostname: "*.example.net" })]),
        referenceGrant("gateways", "certs", { namespace: "default", kind: "Gateway" }, { kind: "Secret" }),
        route,
        ...backend,
      ],
      BOTH,
    );
    expect(r.frontends[0]!.certificates).toEqual(["default/site", "certs/shared"]);
  });

  it(`bind at most ${MAX_PORT_CERTIFICATES} certificates on a port: a bind line holds 64 words`, () => {
    const names = Array.from({ length: MAX_PORT_CERTIFICATES + 1 }, (_, i) => `c${i}`);
    const all = held(["a", names.map((n) => `default/${n}`)]);
    const r = resolve(
      [
        gatewayClass(),
        gateway("gw", [
          https(
            "https",
            names.map((n) => secret(n)),
          ),
        ]),
        route,
        ...backend,
      ],
      all,
    );
    expect(r.frontends[0]!.certificates).toHaveLength(MAX_PORT_CERTIFICATES);
    expect(message(r, "https", "ResolvedRefs")).toContain(
      `certificate default/c${MAX_PORT_CERTIFICATES}: port 8443 binds at most ${MAX_PORT_CERTIFICATES} certificates`,
    );
  });

  it("refuse Passthrough, TLS listeners, HTTPS on --http-port and HTTP beside HTTPS on one port", () => {
    const r = resolve(
      [
        gatewayClass(),
        gateway("gw", [
          https("passthrough", [], { tls: { mode: "Passthrough" } }),
          { name: "tls", port: 8444, protocol: "TLS" },
          https("on-http-port", [secret("site")], { port: 80 }),
          { name: "http", port: 80, hostname: "plain.example.com" },
          https("mixed-https", [secret("site")], { port: 8446 }),
          { name: "mixed-http", port: 8446, hostname: "x.example.com" },
        ]),
      ],
      BOTH,
    );
    const c = listeners(r);
    expect(c.passthrough).toContain("Accepted False UnsupportedProtocol");
    expect(message(r, "passthrough", "Accepted")).toBe(
      "HTTPS with tls.mode Passthrough is not supported: Terminate only",
    );
    expect(c.tls).toContain("Accepted False UnsupportedProtocol");
    expect(c["on-http-port"]).toContain("Accepted False PortUnavailable");
    // A refused HTTPS listener takes nothing from the HTTP one on its port.
    expect(c.http).toContain("Conflicted False NoConflicts");
    expect(c["mixed-https"]).toContain("Conflicted True ProtocolConflict");
    expect(c["mixed-http"]).toContain("Conflicted True ProtocolConflict");
  });
});

describe("the certificates the dry run takes the nodes to hold (render --gateway-certs)", () => {
  it("are those named, held by every node; none without the flag, and it says how to name them", () => {
    expect(assumedCertificates("default/site, certs/shared")).toEqual({
      holders: [{ name: "--gateway-certs", certificates: ["default/site", "certs/shared"] }],
      unknown: "",
    });
    const none = resolve(
      [gatewayClass(), gateway("gw", [https("https", [secret("site")])])],
      assumedCertificates(undefined),
    );
    expect(message(none, "https", "ResolvedRefs")).toBe(
      "certificate default/site (default/site.pem): the dry run binds only the certificates --gateway-certs names (namespace/name, comma-separated)",
    );
    const other = resolve(
      [gatewayClass(), gateway("gw", [https("https", [secret("site")])])],
      assumedCertificates("default/other"),
    );
    expect(message(other, "https", "ResolvedRefs")).toBe(
      "certificate default/site (default/site.pem): not held by --gateway-certs",
    );
  });

  it("refuse what is not namespace/name", () => {
    for (const bad of ["site", "default/Site", "a/b/c", "/site"])
      expect(() => assumedCertificates(bad)).toThrow(/--gateway-certs: .* is not a certificateRef as namespace\/name/);
  });
});
