import { describe, expect, it } from "vitest";
import { RenderContext } from "../../../../shared/app/render-context.js";
import { configDescriptors, descriptorsNeeded, haproxyReserve } from "../../../../shared/core/model/descriptors.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice } from "../../../support/fixtures.js";

const web = (name: string, addresses: string[]) => [
  service(name, [{ port: 80, targetPort: 8080 }]),
  slice(name, [{ port: 8080 }], addresses),
];

describe("the descriptors a config needs", () => {
  it("counts servers, listening addresses and stats sockets from the text, and HAProxy's own share", () => {
    const config = [
      "global",
      "    stats socket /run/admin.sock mode 600 level admin",
      "    nbthread 4",
      "    maxconn 500",
      "    # server commented out",
      "frontend http",
      "    bind 127.0.0.1:80,127.0.0.1:81",
      "    bind :9000-9009",
      "    bind-process 1",
      "backend b",
      "    default-server check",
      "    server s1 10.0.0.1:80",
      "    server s2 10.0.0.2:80 disabled",
      "    server-template t 1-5 10.0.0.9:80",
      "    server-state-file x",
      "",
    ].join("\n");
    const count = configDescriptors(config);
    // 2 + 5 servers, 2 + 10 listening addresses, a stats socket with its 10 connections.
    expect(count).toEqual({ own: 7 + 12 + 11, maxconn: 500, nbthread: 4 });
    // Its threads and maxconn, not the node's: 10 + 3 × 4 + 1 + 11 + 2 × 500.
    expect(descriptorsNeeded(count, 2)).toBe(30 + 1034);
    // Without them: a thread per CPU and HAProxy's least connections, 100.
    expect(haproxyReserve(2)).toBe(10 + 6 + 1 + 11 + 200);
  });

  it("counts a server only when it is health-checked: by its own line, its backend's or its defaults' default-server", () => {
    const config = [
      "defaults checked",
      "    default-server check inter 2s",
      "backend a from checked",
      "    server a1 10.0.0.1:80",
      "    server a2 10.0.0.2:80 no-check",
      "backend b",
      "    server b1 10.0.0.3:80",
      "defaults plain",
      "    mode http",
      "backend c from plain",
      "    server c1 10.0.0.4:80",
      "    server c2 10.0.0.5:80 check",
      "backend d from plain",
      "    default-server maxconn 5 check",
      "    server d1 10.0.0.6:80",
      "backend e from checked",
      "    default-server no-check",
      "    server e1 10.0.0.7:80",
      "",
    ].join("\n");
    // a1, b1 (the last defaults above it), c2 and d1.
    expect(configDescriptors(config).own).toBe(4);
  });

  it("counts from the model what it counts from the text the built-in templates render of it", () => {
    const options = parseRenderOptions({
      statsSocket: "/tmp/servicelb-test.sock",
      sslCert: "/etc/haproxy/certs/lb.pem",
      tcpServices: "db:5432,cache:6379",
      spareBackends: 3,
    });
    const ctx = new RenderContext(options);
    const items = [
      ...web("web", ["10.0.0.1", "10.0.0.2"]),
      ...web(
        "gone",
        Array.from({ length: 9 }, (_, i) => `10.0.1.${i + 1}`),
      ),
      service("db", [{ port: 5432 }]),
      slice("db", [{ port: 5432 }], ["10.0.2.1"]),
      service("cache", [{ port: 6379 }]),
      slice("cache", [{ port: 6379 }], ["10.0.3.1"]),
      service("tls", [{ port: 80, targetPort: 8443 }], {
        annotations: { "serviceloadbalancer/lb.sslTerm": "true" },
      }),
      slice("tls", [{ port: 8443 }], ["10.0.4.1"]),
    ];
    const first = ctx.render(snapshotFromDocuments([list(items, "1")]));
    expect(first.stats.descriptors).toBe(configDescriptors(first.config).own);
    // Spares holding a Service, and a backend left behind.
    const after = ctx.render(
      snapshotFromDocuments([list([...items.slice(0, 2), ...items.slice(4), ...web("new", ["10.0.5.1"])], "2")]),
    );
    expect(after.layoutFresh).toBeNull();
    expect(after.layout!.vacated).toHaveLength(1);
    expect(after.stats.descriptors).toBe(configDescriptors(after.config).own);
  });
});
