import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { list, service, slice } from "../support/fixtures.js";

const root = join(import.meta.dirname, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "servicelb-filters-"));
const snapshot = join(dir, "cluster.json");
writeFileSync(
  snapshot,
  JSON.stringify(
    list([
      service("web", [{ port: 80 }]),
      slice("web", [{ port: 8080 }], ["10.0.0.1"]),
      service("secure", [{ port: 80 }], { annotations: { "serviceloadbalancer/lb.sslTerm": "true" } }),
      slice("secure", [{ port: 8443 }], ["10.0.0.3"]),
      service("db", [{ port: 5432 }], { namespace: "prod" }),
      slice("db", [{ port: 5432 }], ["10.0.0.2"], { namespace: "prod" }),
    ]),
  ),
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function render(...args: string[]) {
  const r = spawnSync(
    process.execPath,
    [join(root, "bin", "servicelb.js"), "render", "--snapshot", snapshot, ...args],
    { encoding: "utf8", env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root" } },
  );
  const lines = r.stderr.split("\n");
  return {
    code: r.status,
    stdout: r.stdout,
    warnings: lines.filter((l) => l.startsWith("warning: ")),
    notes: lines.filter((l) => l.startsWith("note: ")),
  };
}

describe("servicelb render: filters that match nothing, and a TLS Service without a certificate", () => {
  it.each([
    [["--target-service", "nope"], "warning: --target-service nope matches no Service"],
    [
      ["--namespace", "shoop"],
      "warning: --namespace shoop matches no Service (namespaces with Services: default, prod)",
    ],
    [
      ["--tcp-services", "prod/db:80"],
      "warning: prod/db:80: --tcp-services names a port the Service does not have (its TCP ports: 5432)",
    ],
    [["--tcp-services", "nosuch/svc:1234"], "warning: nosuch/svc:1234: --tcp-services names no such Service"],
  ])("%j: exit 0 with a warning on stderr", (args, warning) => {
    const r = render(...args);
    expect(r.code).toBe(0);
    expect(r.warnings).toContain(warning);
  });

  it("says on stderr what --namespace left out, and nothing without a scoping flag", () => {
    expect(render("--namespace", "prod").notes).toEqual([
      "note: 2 Services left out by the scoping flags (default/web, default/secure); --format json lists each with its reason",
    ]);
    expect(render().notes).toEqual([]);
  });

  it("lists what --namespace left out in the JSON's skipped", () => {
    const r = render("--namespace", "prod", "--format", "json");
    const out = JSON.parse(r.stdout) as { skipped: Array<{ service: string; reason: string }> };
    expect(out.skipped).toEqual(
      expect.arrayContaining([
        { service: "default/web", reason: "outside --namespace prod" },
        { service: "default/secure", reason: "outside --namespace prod" },
      ]),
    );
  });

  it("says that an lb.sslTerm Service is not served without --ssl-cert", () => {
    expect(render().warnings).toEqual([
      "warning: default/secure serviceloadbalancer/lb.sslTerm: not served: no --ssl-cert is configured, and a TLS Service is never served in clear text",
    ]);
  });
});
