import { describe, expect, it } from "vitest";
import { parseRenderOptions, type RenderOptionsInput } from "../../../../shared/core/settings/options.js";
import { scopeReport } from "../../../../shared/core/kubernetes/scope-report.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";

const cluster = snapshotFromDocuments([
  list([
    service("web", [{ port: 80 }]),
    slice("web", [{ port: 8080 }], ["10.0.0.1"]),
    service(
      "db",
      [
        { port: 5432, name: "pg" },
        { port: 53, name: "dns", protocol: "UDP" },
      ],
      { namespace: "prod", labels: { tier: "data" } },
    ),
    slice("db", [{ port: 5432, name: "pg" }], ["10.0.0.2"], { namespace: "prod" }),
  ]),
]);

const report = (options: RenderOptionsInput) => scopeReport(cluster, parseRenderOptions(options));

describe("filters that match nothing", () => {
  it("says nothing when no filter is given, or when every filter matches", () => {
    expect(report({})).toEqual({ warnings: [], skipped: [] });
    expect(report({ selector: "tier=data", tcpServices: "prod/db:5432" })).toEqual({ warnings: [], skipped: [] });
  });

  it("warns about a --namespace without Services, and lists what it left out", () => {
    expect(report({ namespace: "other" })).toEqual({
      warnings: [
        { service: "-", message: "--namespace other matches no Service (namespaces with Services: default, prod)" },
      ],
      skipped: [
        { service: "default/web", reason: "outside --namespace other" },
        { service: "prod/db", reason: "outside --namespace other" },
      ],
    });
  });

  it("warns about a --target-service that names no Service, and lists what it left out", () => {
    expect(report({ targetService: "nope" }).warnings).toEqual([
      { service: "-", message: "--target-service nope matches no Service" },
    ]);
    expect(report({ targetService: "db", namespace: "default" }).warnings).toEqual([
      { service: "-", message: "--target-service db matches no Service in namespace default" },
    ]);
    expect(report({ targetService: "prod/db" })).toEqual({
      warnings: [],
      skipped: [{ service: "default/web", reason: "not --target-service prod/db" }],
    });
  });

  it("warns about a --selector that no Service in scope matches", () => {
    expect(report({ selector: "tier=web,!canary" }).warnings).toEqual([
      { service: "-", message: "--selector tier=web,!canary matches no Service" },
    ]);
  });

  it("warns about --tcp-services entries naming no Service, a Service out of scope, or a port the Service does not have", () => {
    expect(report({ tcpServices: "nosuch/svc:1234,prod/db:80,prod/db:53,web:80" }).warnings).toEqual([
      { service: "nosuch/svc", port: 1234, message: "--tcp-services names no such Service" },
      {
        service: "prod/db",
        port: 80,
        message: "--tcp-services names a port the Service does not have (its TCP ports: 5432)",
      },
      {
        service: "prod/db",
        port: 53,
        message: "--tcp-services names a port the Service does not have (its TCP ports: 5432)",
      },
    ]);
    expect(report({ namespace: "default", tcpServices: "prod/db:5432" }).warnings).toEqual([
      { service: "prod/db", port: 5432, message: "--tcp-services names a Service outside --namespace default" },
    ]);
  });
});
