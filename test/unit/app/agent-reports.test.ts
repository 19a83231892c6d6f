import pino from "pino";
import { describe, expect, it } from "vitest";
import { AgentReports, digestForFleet, roomForFleet } from "../../../shared/app/agent-reports.js";
import { agentReport } from "../../support/fixtures.js";

const report = agentReport;
const silent = pino({ level: "silent" });
/** No agent count known (the notifier found none, or discovery failed). */
const unknownAgents = async () => undefined;

describe("the digest the agents' reports allow", () => {
  it("is tree1 only when every report lists it", () => {
    expect(digestForFleet([report("a", ["sha256", "tree1"]), report("b", ["sha256", "tree1"])])).toEqual({
      kind: "tree1",
    });
    // An agent before tree1 reports no digests: it verifies sha256 only.
    expect(digestForFleet([report("a", ["sha256", "tree1"]), report("old")])).toEqual({
      kind: "sha256",
      reason: "node old (servicelb/0.1.0) does not report that it verifies tree1",
    });
    expect(digestForFleet([report("a", ["sha256"])]).kind).toBe("sha256");
  });

  it("is sha256 while fewer agents have reported than the notifier finds", () => {
    const reports = [report("a", ["sha256", "tree1"]), report("b", ["sha256", "tree1"])];
    expect(digestForFleet(reports, 3)).toEqual({
      kind: "sha256",
      reason: "3 agents are known, 2 have reported to the store",
    });
    expect(digestForFleet(reports, 2).kind).toBe("tree1");
  });

  it("is sha256 with no report, or with one that cannot be read", () => {
    expect(digestForFleet([])).toEqual({ kind: "sha256", reason: "no agent has reported to the store" });
    expect(digestForFleet([report("a", ["tree1"]), { node: 7 }])).toEqual({
      kind: "sha256",
      reason: "an agent's report cannot be read",
    });
  });
});

describe("the digest a reconcile instance publishes by", () => {
  it("is the setting's when it names one, without waiting for a read or asking for the agents", async () => {
    let reads = 0;
    let counted = 0;
    const choice = new AgentReports(
      "tree1",
      () => {
        reads++;
        return new Promise<unknown[]>(() => undefined);
      },
      async () => {
        counted++;
        return 1;
      },
      silent,
    );
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.current).toBe("tree1");
    // The reports are still read, for the nodes' room (below).
    await new Promise((r) => setImmediate(r));
    expect(reads).toBe(1);
    expect(counted).toBe(0);
  });

  it("waits for a read on the first pass and on tree1, not on sha256, and reads again only when due", async () => {
    let now = 0;
    let reports: unknown[] = [report("a", ["sha256", "tree1"])];
    let reads = 0;
    let release: (() => void) | undefined;
    const choice = new AgentReports(
      "auto",
      async () => {
        reads++;
        if (reads === 3) await new Promise<void>((r) => (release = r));
        return reports;
      },
      unknownAgents,
      silent,
      60_000,
      () => now,
    );
    expect(choice.current).toBe("sha256");
    expect(await choice.forPass()).toBe("tree1");
    now = 30_000;
    expect(await choice.forPass()).toBe("tree1");
    expect(reads).toBe(1);
    // An old agent joins: the due read on tree1 is waited for, so this very pass goes back to sha256.
    reports = [report("a", ["sha256", "tree1"]), report("old")];
    now = 60_000;
    expect(await choice.forPass()).toBe("sha256");
    expect(reads).toBe(2);
    // On sha256 a due read goes on in the background: the pass does not wait for it.
    reports = [report("a", ["sha256", "tree1"])];
    now = 120_000;
    expect(await choice.forPass()).toBe("sha256");
    expect(reads).toBe(3);
    release!();
    await new Promise((r) => setImmediate(r));
    expect(await choice.forPass()).toBe("tree1");
    expect(reads).toBe(3);
  });

  it("goes back to sha256 when the reports cannot be read", async () => {
    let now = 0;
    let fail = true;
    const choice = new AgentReports(
      "auto",
      async () => {
        if (fail) throw new Error("store down");
        return [report("a", ["sha256", "tree1"])];
      },
      unknownAgents,
      silent,
      1000,
      () => now,
    );
    expect(await choice.forPass()).toBe("sha256");
    fail = false;
    now = 1000;
    await choice.forPass();
    await new Promise((r) => setImmediate(r));
    expect(await choice.forPass()).toBe("tree1");
    fail = true;
    now = 2000;
    // On tree1 a due read is waited for: a fleet in doubt is served by sha256 from this pass on.
    expect(await choice.forPass()).toBe("sha256");
  });

  it("waits at most a second for a first read that hangs, and publishes by sha256 meanwhile", async () => {
    const choice = new AgentReports(
      "auto",
      () => new Promise<unknown[]>(() => undefined),
      unknownAgents,
      silent,
      60_000,
      Date.now,
      50,
    );
    const t0 = performance.now();
    expect(await choice.forPass()).toBe("sha256");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
  });

  it("publishes by sha256 on tree1 when a due read does not come back in time", async () => {
    let now = 0;
    let hang = false;
    const choice = new AgentReports(
      "auto",
      () => (hang ? new Promise<unknown[]>(() => undefined) : Promise.resolve([report("a", ["sha256", "tree1"])])),
      unknownAgents,
      silent,
      1000,
      () => now,
      50,
    );
    expect(await choice.forPass()).toBe("tree1");
    hang = true;
    now = 1000;
    expect(await choice.forPass()).toBe("sha256");
  });

  it("counts the agents the notifier finds: fewer reports keep sha256", async () => {
    let agents: number | undefined = 2;
    let now = 0;
    const choice = new AgentReports(
      "auto",
      async () => [report("a", ["sha256", "tree1"])],
      async () => agents,
      silent,
      1000,
      () => now,
    );
    expect(await choice.forPass()).toBe("sha256");
    // Discovery failed: the count is not known, the reports decide.
    agents = undefined;
    now = 1000;
    await choice.forPass();
    await new Promise((r) => setImmediate(r));
    expect(await choice.forPass()).toBe("tree1");
  });

  it("reads again when due after a read that threw at once", async () => {
    let now = 0;
    let reads = 0;
    const choice = new AgentReports(
      "auto",
      () => {
        reads++;
        if (reads === 1) throw new Error("no store");
        return Promise.resolve([report("a", ["sha256", "tree1"])]);
      },
      unknownAgents,
      silent,
      1000,
      () => now,
    );
    expect(await choice.forPass()).toBe("sha256");
    now = 1000;
    await choice.forPass();
    await new Promise((r) => setImmediate(r));
    expect(reads).toBe(2);
    expect(await choice.forPass()).toBe("tree1");
  });
});

describe("the room of the smallest node", () => {
  const limited = (node: string, limit: number, reserved: number) => ({
    ...report(node, ["sha256", "tree1"]),
    openFiles: { limit, reserved },
  });

  it("is the least limit less HAProxy's own, over the reports that say; unknown when none does", () => {
    expect(roomForFleet([limited("a", 20_000, 228), limited("b", 1_048_576, 1_000), report("old")])).toBe(19_772);
    expect(roomForFleet([report("old"), { node: 7 }])).toBeNull();
    expect(roomForFleet([])).toBeNull();
  });

  it("is read whatever the digest setting, and stands while the reports cannot be read", async () => {
    let now = 0;
    let fail = false;
    const reports = new AgentReports(
      "sha256",
      async () => {
        if (fail) throw new Error("store down");
        return [limited("a", 1000, 228)];
      },
      unknownAgents,
      silent,
      1000,
      () => now,
    );
    expect(reports.room).toBeNull();
    await reports.forPass();
    await new Promise((r) => setImmediate(r));
    expect(reports.room).toBe(772);
    fail = true;
    now = 1000;
    await reports.forPass();
    await new Promise((r) => setImmediate(r));
    expect(reports.room).toBe(772);
  });
});
