import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { overlaySnapshot, type FreshReads } from "../../../../shared/core/kubernetes/snapshot-overlay.js";
import { snapshotFromDocuments, type Snapshot } from "../../../../shared/core/kubernetes/snapshot.js";
import {
  endpointSliceSchema,
  serviceSchema,
  type EndpointSlice,
  type Service,
} from "../../../../shared/core/kubernetes/snapshot-schemas.js";
import { list, service, slice } from "../../../support/fixtures.js";

const port = [{ name: "http", port: 80, targetPort: 8080 }];
const slicePorts = [{ name: "http", port: 8080 }];
const svc = (name: string, namespace = "default", rv = "5"): Service =>
  serviceSchema.parse(service(name, port, { namespace, resourceVersion: rv }));
const sl = (owner: string, ip: string, name: string, namespace = "default"): EndpointSlice =>
  endpointSliceSchema.parse(slice(owner, slicePorts, [ip], { name, namespace, resourceVersion: "6" }));
const none: FreshReads = { services: [], endpointSlices: [], slicesOf: [], problems: [] };
const names = (items: ReadonlyArray<{ metadata: { namespace: string; name: string } }>) =>
  items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`);

describe("overlaySnapshot", () => {
  const base: Snapshot = snapshotFromDocuments([
    list(
      [
        service("a", port),
        service("b", port),
        service("c", port, { namespace: "shop" }),
        slice("a", slicePorts, ["10.0.0.1"], { name: "a-1" }),
        slice("b", slicePorts, ["10.0.0.2"], { name: "b-1" }),
        slice("b", slicePorts, ["10.0.0.3"], { name: "b-2" }),
        slice("c", slicePorts, ["10.0.0.4"], { name: "c-1", namespace: "shop" }),
      ],
      "40",
    ),
  ]);

  it("swaps a read object in place and keeps every other object, and the base's revision", () => {
    const fresh = sl("a", "10.9.9.9", "a-1");
    const out = overlaySnapshot(base, {
      ...none,
      endpointSlices: [{ namespace: "default", name: "a-1", item: fresh }],
    });
    expect(out.endpointSlices[0]).toBe(fresh);
    expect(out.endpointSlices.slice(1)).toEqual(base.endpointSlices.slice(1));
    for (let i = 1; i < base.endpointSlices.length; i++) expect(out.endpointSlices[i]).toBe(base.endpointSlices[i]);
    expect(out.services).toEqual(base.services);
    expect(out.revision).toBe("40");
    expect(out.trustedRevisions).toBe(base.trustedRevisions);
  });

  it("drops an object read as gone, and appends one the base did not have", () => {
    const added = svc("d");
    const out = overlaySnapshot(base, {
      ...none,
      services: [
        { namespace: "default", name: "b", item: null },
        { namespace: "default", name: "d", item: added },
      ],
    });
    expect(names(out.services)).toEqual(["default/a", "shop/c", "default/d"]);
    expect(out.services.at(-1)).toBe(added);
  });

  it("replaces every slice of a Service read by label, and no other Service's", () => {
    const fresh = sl("b", "10.7.7.7", "b-3");
    const out = overlaySnapshot(base, {
      ...none,
      slicesOf: [{ namespace: "default", service: "b", items: [fresh] }],
    });
    expect(names(out.endpointSlices)).toEqual(["default/a-1", "shop/c-1", "default/b-3"]);
    // Same name in another namespace is another Service.
    const other = overlaySnapshot(base, { ...none, slicesOf: [{ namespace: "other", service: "c", items: [] }] });
    expect(names(other.endpointSlices)).toEqual(names(base.endpointSlices));
  });

  it("takes the revision of the newest object read, and never lays an older copy over a newer one", () => {
    const newer = endpointSliceSchema.parse(
      slice("a", slicePorts, ["10.9.9.9"], { name: "a-1", resourceVersion: "45" }),
    );
    const out = overlaySnapshot(base, {
      ...none,
      endpointSlices: [{ namespace: "default", name: "a-1", item: newer }],
    });
    expect(out.revision).toBe("45");
    expect(out.endpointSlices[0]).toBe(newer);
    const stale = endpointSliceSchema.parse(
      slice("a", slicePorts, ["10.8.8.8"], { name: "a-1", resourceVersion: "44" }),
    );
    const again = overlaySnapshot(out, {
      ...none,
      endpointSlices: [{ namespace: "default", name: "a-1", item: stale }],
    });
    expect(again.endpointSlices[0]).toBe(newer);
    expect(again.revision).toBe("45");
  });

  it("reports the problems of what was read beside the base's, each once", () => {
    const out = overlaySnapshot(base, { ...none, problems: ["read (EndpointSlice default/x): bad"] });
    expect(out.problems).toEqual([...base.problems, "read (EndpointSlice default/x): bad"]);
    expect(overlaySnapshot(out, { ...none, problems: ["read (EndpointSlice default/x): bad"] }).problems).toEqual(
      out.problems,
    );
  });

  it("holds exactly the base's objects with the reads laid over them (property)", () => {
    const ids = fc.constantFrom("a", "b", "c", "d", "e");
    const spaces = fc.constantFrom("default", "shop");
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(spaces, ids), { selector: ([n, i]) => `${n}/${i}` }),
        fc.array(fc.tuple(spaces, ids, fc.boolean())),
        (present, reads) => {
          const start: Snapshot = {
            services: present.map(([n, i]) => svc(i, n)),
            endpointSlices: [],
            endpoints: [],
            revision: "7",
            problems: [],
          };
          const fresh: FreshReads = {
            ...none,
            services: reads.map(([n, i, keep]) => ({ namespace: n, name: i, item: keep ? svc(i, n, "9") : null })),
          };
          const expected = new Map(present.map(([n, i]) => [`${n}/${i}`, "5"]));
          const last = new Map<string, boolean>();
          for (const [n, i, keep] of reads) last.set(`${n}/${i}`, keep);
          for (const [id, keep] of last) {
            if (keep) expected.set(id, "9");
            else expected.delete(id);
          }
          const out = overlaySnapshot(start, fresh);
          const got = new Map(
            out.services.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s.metadata.resourceVersion]),
          );
          expect(out.services).toHaveLength(got.size);
          expect(got).toEqual(expected);
        },
      ),
    );
  });
});
