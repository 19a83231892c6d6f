import { describe, expect, it } from "vitest";
import { holdPendingServices } from "../../../../shared/core/kubernetes/pending-services.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";

const port = [{ name: "http", port: 80, targetPort: 8080 }];
const selector = { app: "x" };

describe("holdPendingServices", () => {
  const snapshot = snapshotFromDocuments([
    list([
      service("fresh", port, { selector }),
      service("served", port, { selector }),
      service("sliced", port, { selector }),
      service("manual", port),
      service("elsewhere", port, { selector }),
      service("classic", port, { selector }),
      slice("sliced", [{ name: "http", port: 8080 }], ["10.0.0.1"]),
      slice("elsewhere", [{ name: "http", port: 8080 }], ["10.0.0.2"], { namespace: "other" }),
      {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: { name: "classic", namespace: "default" },
        subsets: [{ addresses: [{ ip: "10.0.0.3" }], ports: [{ name: "http", port: 8080 }] }],
      },
    ]),
  ]);

  it("holds Services with a selector, no slice and no Endpoints, that were never rendered", () => {
    const { snapshot: kept, held } = holdPendingServices(snapshot, new Set(["default/served"]));
    // A slice of another namespace's Service of the same name does not count.
    expect(held).toEqual(["default/fresh", "default/elsewhere"]);
    expect(kept.services.map((s) => s.metadata.name)).toEqual(["served", "sliced", "manual", "classic"]);
    expect(kept.endpointSlices).toBe(snapshot.endpointSlices);
  });

  it("returns the snapshot itself when nothing is held", () => {
    const all = new Set(snapshot.services.map((s) => `default/${s.metadata.name}`));
    expect(holdPendingServices(snapshot, all)).toEqual({ snapshot, held: [] });
    expect(holdPendingServices(snapshot, all).snapshot).toBe(snapshot);
    // Never rendered but with their endpoints there: nothing held either.
    const withEndpoints = new Set(["default/fresh", "default/served", "default/elsewhere"]);
    expect(holdPendingServices(snapshot, withEndpoints).snapshot).toBe(snapshot);
  });
});
