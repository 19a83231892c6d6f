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

  it("reports a second object of one kind, namespace and name and keeps the first", () => {
    const ok = service("ok", [{ port: 80 }]);
    const snap = parseSnapshot(
      JSON.stringify(list([service("web", [{ port: 80 }]), service("web", [{ port: 8080 }]), ok])),
    );
    expect(snap.services.map((s) => `${s.metadata.name}:${s.spec.ports[0]!.port}`)).toEqual(["web:80", "ok:80"]);
    expect(snap.problems).toEqual([expect.stringMatching(/^Service default\/web: Duplicate value/)]);
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
