import pino from "pino";
import { describe, expect, it } from "vitest";
import type { StatusRead } from "../../../shared/adapters/store.js";
import { StoreError } from "../../../shared/adapters/store-error.js";
import {
  AgentReports,
  chunksForFleet,
  digestForFleet,
  fleetVerdict,
  roomForFleet,
} from "../../../shared/app/agent-reports.js";
import { agentReport } from "../../support/fixtures.js";

const report = agentReport;
/** A report of an agent that verifies tree1 and reads chunks. */
const current = (node: string) => ({ ...report(node, ["sha256", "tree1"]), formats: ["chunks1"] });
const silent = pino({ level: "silent" });
/** A read of status/ in which every record listed was read. */
const whole = (reports: unknown[]): StatusRead => ({ listed: reports.length, reports, unread: [] });
/** A read in which `unread` more records were listed than read (a 503 twice, a timeout). */
const short = (reports: unknown[], unread: number): StatusRead => ({
  listed: reports.length + unread,
  reports,
  unread: Array.from({ length: unread }, (_, i) => ({
    key: `status/lost-${i}.json`,
    error: new StoreError("S3 get failed: HTTP 503 SlowDown", { transient: true }),
  })),
});
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
        return new Promise<StatusRead>(() => undefined);
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
        return whole(reports);
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

  it("keeps tree1 and chunks through reads that fail, for DOUBT_LIMIT_MS at most", async () => {
    let now = 0;
    let fail = true;
    const choice = new AgentReports(
      "auto",
      async () => {
        if (fail) throw new StoreError("S3 list failed: timed out", { transient: true });
        return whole([current("a")]);
      },
      unknownAgents,
      silent,
      1000,
      () => now,
      1000,
      5000,
    );
    // No read has decided yet: in doubt, sha256 and whole.
    expect(await choice.forPass()).toBe("sha256");
    fail = false;
    now = 1000;
    await choice.forPass();
    await new Promise((r) => setImmediate(r));
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.chunked).toBe(true);
    fail = true;
    for (now = 2000; now <= 6000; now += 1000) {
      expect(await choice.forPass()).toBe("tree1");
      expect(choice.chunked).toBe(true);
    }
    // Over five seconds without a whole read: whole configs by sha256 until one succeeds.
    now = 7000;
    expect(await choice.forPass()).toBe("sha256");
    expect(choice.chunked).toBe(false);
  });

  it("waits at most a second for a first read that hangs, and publishes by sha256 meanwhile", async () => {
    const choice = new AgentReports(
      "auto",
      () => new Promise<StatusRead>(() => undefined),
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

  it("publishes by the last decision when a due read does not come back in time", async () => {
    let now = 0;
    let hang = false;
    const choice = new AgentReports(
      "auto",
      () =>
        hang ? new Promise<StatusRead>(() => undefined) : Promise.resolve(whole([report("a", ["sha256", "tree1"])])),
      unknownAgents,
      silent,
      1000,
      () => now,
      50,
    );
    expect(await choice.forPass()).toBe("tree1");
    hang = true;
    now = 1000;
    const t0 = performance.now();
    expect(await choice.forPass()).toBe("tree1");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
  });

  it("counts the agents the notifier finds: fewer reports keep sha256", async () => {
    let agents: number | undefined = 2;
    let now = 0;
    const choice = new AgentReports(
      "auto",
      async () => whole([report("a", ["sha256", "tree1"])]),
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
        return Promise.resolve(whole([report("a", ["sha256", "tree1"])]));
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

describe("a read of the reports that came up short", () => {
  const tree1 = (r: { digests: string[] }) => r.digests.includes("tree1");

  it("decides nothing when records listed could not be read, unless one read says no", () => {
    const read = { records: 3, reports: [current("a"), current("b")], unread: 1 };
    expect(fleetVerdict(read, 3, tree1, "verifies tree1")).toEqual({
      allowed: undefined,
      reason: "1 of 3 agents' reports cannot be read",
    });
    // A report read that says the agent cannot: no, whatever was not read.
    const old = { records: 3, reports: [current("a"), report("old")], unread: 1 };
    expect(fleetVerdict(old, 3, tree1, "verifies tree1")).toEqual({
      allowed: false,
      reason: "node old (servicelb/0.1.0) does not report that it verifies tree1",
    });
    const garbled = { records: 3, reports: [current("a"), "not json"], unread: 1 };
    expect(fleetVerdict(garbled, 3, tree1, "verifies tree1").allowed).toBe(false);
    // A known agent that has never reported: more agents than records listed, read or not.
    expect(fleetVerdict(read, 4, tree1, "verifies tree1")).toEqual({
      allowed: false,
      reason: "4 agents are known, 3 have reported to the store",
    });
  });

  it("decides nothing when the records could not be listed, unless more agents are known than were listed last", () => {
    const failed = { records: undefined, reports: [], unread: 0 };
    expect(fleetVerdict(failed, 3, tree1, "verifies tree1", 3)).toEqual({
      allowed: undefined,
      reason: "the agents' reports cannot be listed",
    });
    expect(fleetVerdict(failed, undefined, tree1, "verifies tree1", 3).allowed).toBeUndefined();
    expect(fleetVerdict(failed, 4, tree1, "verifies tree1", 3)).toEqual({
      allowed: false,
      reason: "4 agents are known, 3 have reported to the store",
    });
  });

  it("allows chunks on a whole read only: every report lists chunks1, as many as the agents known", () => {
    expect(chunksForFleet([current("a"), current("b")])).toBe(true);
    expect(chunksForFleet([current("a"), current("b")], 3)).toBe(false);
    expect(chunksForFleet([current("a"), report("b", ["sha256", "tree1"])])).toBe(false);
    expect(chunksForFleet([])).toBe(false);
  });

  it("keeps chunks and tree1 through short reads; a report read without them, or a new agent, switches back", async () => {
    let now = 0;
    let read: StatusRead = whole([current("a"), current("b"), current("c")]);
    let agents = 3;
    let listing = true;
    const choice = new AgentReports(
      "auto",
      async () => {
        if (!listing) throw new StoreError("S3 list failed: HTTP 503 SlowDown", { transient: true });
        return read;
      },
      async () => agents,
      silent,
      1000,
      () => now,
    );
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.chunked).toBe(true);
    // One record of three could not be read (a 503 twice): the last decision stands.
    read = short([current("a"), current("b")], 1);
    now = 1000;
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.chunked).toBe(true);
    // The listing itself fails: it stands again.
    listing = false;
    now = 2000;
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.chunked).toBe(true);
    listing = true;
    // A short read in which an agent from before shows: whole, by sha256, from this pass on.
    read = short([current("a"), report("old", [])], 1);
    now = 3000;
    expect(await choice.forPass()).toBe("sha256");
    expect(choice.chunked).toBe(false);
    read = whole([current("a"), current("b"), current("c")]);
    now = 4000;
    await choice.forPass();
    await new Promise((r) => setImmediate(r));
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.chunked).toBe(true);
    // A fourth agent is known that has not reported, while the read comes up short: whole.
    agents = 4;
    read = short([current("a"), current("b")], 1);
    now = 5000;
    expect(await choice.forPass()).toBe("sha256");
    expect(choice.chunked).toBe(false);
  });

  it("lowers the room by what a short read shows, and keeps it otherwise", async () => {
    let now = 0;
    const limited = (node: string, limit: number) => ({ ...current(node), openFiles: { limit, reserved: 0 } });
    let read: StatusRead = whole([limited("a", 5000), limited("b", 3000)]);
    const reports = new AgentReports(
      "auto",
      async () => read,
      unknownAgents,
      silent,
      1000,
      () => now,
    );
    await reports.forPass();
    expect(reports.room).toBe(3000);
    read = short([limited("a", 5000)], 1);
    now = 1000;
    await reports.forPass();
    expect(reports.room).toBe(3000);
    read = short([limited("a", 2000)], 1);
    now = 2000;
    await reports.forPass();
    expect(reports.room).toBe(2000);
    read = whole([limited("a", 5000), limited("b", 3000)]);
    now = 3000;
    await reports.forPass();
    expect(reports.room).toBe(3000);
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
        return whole([limited("a", 1000, 228)]);
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
