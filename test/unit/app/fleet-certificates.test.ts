import pino from "pino";
import { describe, expect, it } from "vitest";
import type { StatusRead } from "../../../shared/adapters/store.js";
import { AgentReports } from "../../../shared/app/agent-reports.js";
import { fleetCertificates, UNREAD } from "../../../shared/app/fleet-certificates.js";
import { agentReport } from "../../support/fixtures.js";

const holding = (node: string, certs: string[] | null) => ({ ...agentReport(node), gatewayCertificates: certs });

describe("the Gateway certificates the fleet holds", () => {
  it("are each node's, as its report lists them; an old report or one that cannot be read holds none", () => {
    const held = fleetCertificates(
      UNREAD,
      [holding("b", ["default/site"]), agentReport("a"), { node: 7 }, holding("c", [])],
      true,
    );
    expect(held.holders).toEqual([
      { name: "a node whose report cannot be read", certificates: [] },
      { name: "node a", certificates: null },
      { name: "node b", certificates: ["default/site"] },
      { name: "node c", certificates: [] },
    ]);
    expect(fleetCertificates(UNREAD, [], true)).toEqual({
      holders: [],
      unknown: "no node has reported to the store yet",
    });
  });

  it("keep what the last read said of the nodes a short read missed", () => {
    const last = fleetCertificates(UNREAD, [holding("a", ["default/site"]), holding("b", ["default/site"])], true);
    const next = fleetCertificates(last, [holding("b", [])], false);
    expect(next.holders).toEqual([
      { name: "node a", certificates: ["default/site"] },
      { name: "node b", certificates: [] },
    ]);
  });
});

describe("the certificates a reconcile pass renders with", () => {
  it("wait for an instance's first read, then are what it read", async () => {
    let release: (() => void) | undefined;
    const reports = new AgentReports(
      "sha256",
      async (): Promise<StatusRead> => {
        await new Promise<void>((r) => (release = r));
        return { listed: 1, reports: [holding("a", ["default/site"])], unread: [] };
      },
      async () => undefined,
      pino({ level: "silent" }),
    );
    await reports.forPass();
    expect(reports.certificates).toBe(UNREAD);
    const pending = reports.certificatesForPass(true);
    await new Promise((r) => setImmediate(r));
    release!();
    expect((await pending).holders).toEqual([{ name: "node a", certificates: ["default/site"] }]);
  });

  it("are none, and say so, when the first read does not come back in time", async () => {
    const reports = new AgentReports(
      "sha256",
      () => new Promise<StatusRead>(() => undefined),
      async () => undefined,
      pino({ level: "silent" }),
      60_000,
      Date.now,
      1000,
      600_000,
      10,
    );
    await reports.forPass();
    expect(await reports.certificatesForPass(true)).toEqual(UNREAD);
  });

  it("are not waited for by a cluster without an HTTPS listener", async () => {
    const reports = new AgentReports(
      "sha256",
      () => new Promise<StatusRead>(() => undefined),
      async () => undefined,
      pino({ level: "silent" }),
      60_000,
      Date.now,
      1000,
      600_000,
      60_000,
    );
    await reports.forPass();
    // The read never comes back and the wait would be a minute: the answer is at once.
    const started = performance.now();
    expect(await reports.certificatesForPass(false)).toEqual(UNREAD);
    expect(performance.now() - started).toBeLessThan(30_000);
  });
});
