import pino from "pino";
import { describe, expect, it } from "vitest";
import type { StatusWriter } from "../../../shared/adapters/gateway-status.js";
import { StoreError } from "../../../shared/adapters/store-error.js";
import type { StatusRead } from "../../../shared/adapters/store.js";
import { fleetRunsConfig, GatewayStatusUpdater, type PassStatus } from "../../../shared/app/gateway-status.js";
import { emptyGatewayObjects, type HTTPRoute } from "../../../shared/core/gateway/schemas.js";
import { condition, CONTROLLER_NAME } from "../../../shared/core/gateway/status.js";
import { agentReport } from "../../support/fixtures.js";

const key = (n: number) => `p/configs/000000-${String(n).padStart(20, "0")}-0000000000-0123456789abcdef.cfg`;
const running = (node: string, k: string | null) => ({
  ...agentReport(node),
  applied:
    k === null
      ? null
      : { key: k, sha256: "0".repeat(64), revision: "1", appliedAt: "2026-01-01T00:00:00Z", how: "reload" },
});
const read = (reports: unknown[], unread = 0): StatusRead => ({
  listed: reports.length + unread,
  reports,
  unread: Array.from({ length: unread }, (_, i) => ({
    key: `status/n${i}.json`,
    error: new StoreError("503", { transient: true }),
  })),
});

describe("fleetRunsConfig", () => {
  it("says runs only when every reporting node runs the config or a later one", () => {
    expect(fleetRunsConfig(read([running("a", key(5)), running("b", key(7))]), key(5))).toEqual({ runs: true });
    expect(fleetRunsConfig(read([running("a", key(5)), running("b", key(4))]), key(5))).toEqual({
      runs: false,
      why: `node b runs ${key(4)}`,
    });
    expect(fleetRunsConfig(read([running("a", null)]), key(5))).toMatchObject({
      runs: false,
      why: expect.stringContaining("node a"),
    });
    expect(fleetRunsConfig(read([]), key(5))).toMatchObject({ runs: false, why: "no node has reported to the store" });
    expect(fleetRunsConfig(read([running("a", key(9))], 1), key(5))).toMatchObject({ runs: false });
    expect(fleetRunsConfig(read(["not a report"]), key(5))).toMatchObject({ runs: false });
  });
});

describe("GatewayStatusUpdater", () => {
  const routes = (n: number): HTTPRoute[] =>
    Array.from({ length: n }, (_, i) => ({
      metadata: { name: `r${i}`, namespace: "default", labels: {}, generation: 1, resourceVersion: "1" },
      spec: { parentRefs: [], hostnames: [], rules: [] },
    }));
  const pass = (n: number): PassStatus => ({
    objects: { ...emptyGatewayObjects(), httpRoutes: routes(n) },
    status: {
      gatewayClasses: [],
      gateways: [],
      httpRoutes: routes(n).map((r) => ({
        namespace: "default",
        name: r.metadata.name,
        parents: [
          {
            parentRef: { group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "default", name: "gw" },
            controllerName: CONTROLLER_NAME,
            conditions: [condition("Accepted", true, "Accepted", "m", 1)],
          },
        ],
      })),
    },
    key: key(1),
  });
  const logged: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: "info" }, { write: (line: string) => logged.push(JSON.parse(line)) });

  it("ends a run that outlasts its bound, says so, and lets the next pass write", async () => {
    let calls = 0;
    const hanging: StatusWriter = {
      write: (_t, _h, _m, _d, signal) => {
        calls++;
        return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      },
    };
    const updater = new GatewayStatusUpdater({
      writer: hanging,
      readReports: async () => read([]),
      log,
      timeoutMs: 50,
    });
    updater.afterPass(pass(20));
    await updater.idle();
    // 8 in flight, none of the other 12 started after the bound.
    expect(calls).toBe(8);
    expect(logged.at(-1)).toMatchObject({ level: 40, msg: expect.stringContaining("within 50 ms") });
  });

  it("runs one pass at a time, the newest waiting one replacing those before it", async () => {
    const seen: number[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const writer: StatusWriter = {
      write: async (t) => {
        seen.push(Number(t.name.slice(1)));
        await gate;
        return "written";
      },
    };
    const updater = new GatewayStatusUpdater({ writer, readReports: async () => read([]), log });
    updater.afterPass(pass(1));
    updater.afterPass(pass(2));
    updater.afterPass(pass(3));
    release();
    await updater.idle();
    // The first pass's one write, then the third pass's three: the second was replaced.
    expect(seen).toEqual([0, 0, 1, 2]);
  });
});

describe("GatewayStatusUpdater and the agents' reports", () => {
  it("leaves the Gateways' status to the next pass when the reports cannot be read, and writes the rest", async () => {
    const written: string[] = [];
    const writer: StatusWriter = {
      write: async (t) => {
        written.push(`${t.kind} ${t.name}`);
        return "written";
      },
    };
    const pending = {
      type: "Programmed",
      status: "Unknown" as const,
      reason: "Pending",
      message: "m",
      observedGeneration: 1,
    };
    const meta = { namespace: "default", labels: {}, generation: 1, resourceVersion: "1" };
    const objects = {
      ...emptyGatewayObjects(),
      gatewayClasses: [{ metadata: { ...meta, name: "servicelb" }, spec: { controllerName: CONTROLLER_NAME } }],
      gateways: [
        {
          metadata: { ...meta, name: "gw" },
          spec: {
            gatewayClassName: "servicelb",
            listeners: [
              {
                name: "http",
                hostname: null,
                port: 8081,
                protocol: "HTTP",
                tls: null,
                allowedRoutes: { namespaces: { from: "Same" as const, selector: null }, kinds: null },
              },
            ],
          },
        },
      ],
    };
    const status = {
      gatewayClasses: [{ name: "servicelb", conditions: [condition("Accepted", true, "Accepted", "m", 1)] }],
      gateways: [
        {
          namespace: "default",
          name: "gw",
          conditions: [condition("Accepted", true, "Accepted", "m", 1), pending],
          listeners: [{ name: "http", supportedKinds: [], attachedRoutes: 0, conditions: [pending] }],
        },
      ],
      httpRoutes: [],
    };
    const log = pino({ level: "silent" });
    const updater = new GatewayStatusUpdater({
      writer,
      readReports: () => Promise.reject(new StoreError("503", { transient: true })),
      log,
    });
    updater.afterPass({ objects, status, key: key(1) });
    await updater.idle();
    expect(written).toEqual(["GatewayClass servicelb"]);
  });
});
