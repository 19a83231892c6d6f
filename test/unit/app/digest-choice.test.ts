import pino from "pino";
import { describe, expect, it } from "vitest";
import { DigestChoice, digestForFleet } from "../../../shared/app/digest-choice.js";

/** A report as an agent of this version writes it (status/<node>.json), with the digests it verifies. */
function report(node: string, digests?: string[]) {
  return {
    node,
    applied: null,
    lastError: null,
    backoff: null,
    haproxy: { running: true },
    reportIntervalSeconds: 30,
    reportedAt: "2026-12-01T00:00:00.000Z",
    agent: "servicelb/0.1.0",
    ...(digests ? { digests } : {}),
  };
}

const silent = pino({ level: "silent" });

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

  it("is sha256 with no report, or with one that cannot be read", () => {
    expect(digestForFleet([])).toEqual({ kind: "sha256", reason: "no agent has reported to the store" });
    expect(digestForFleet([report("a", ["tree1"]), { node: 7 }])).toEqual({
      kind: "sha256",
      reason: "an agent's report cannot be read",
    });
  });
});

describe("the digest a reconcile instance publishes by", () => {
  it("is the setting's when it names one, without reading a report", async () => {
    let reads = 0;
    const choice = new DigestChoice(
      "tree1",
      async () => {
        reads++;
        return [];
      },
      silent,
    );
    expect(await choice.forPass()).toBe("tree1");
    expect(choice.current).toBe("tree1");
    expect(reads).toBe(0);
  });

  it("waits for the reports on the first pass, then reads them again in the background when due", async () => {
    let now = 0;
    let reports: unknown[] = [report("a", ["sha256", "tree1"])];
    let reads = 0;
    let release: (() => void) | undefined;
    const choice = new DigestChoice(
      "auto",
      async () => {
        reads++;
        if (reads === 2) await new Promise<void>((r) => (release = r));
        return reports;
      },
      silent,
      60_000,
      () => now,
    );
    expect(choice.current).toBe("sha256");
    expect(await choice.forPass()).toBe("tree1");
    now = 30_000;
    expect(await choice.forPass()).toBe("tree1");
    expect(reads).toBe(1);
    // An old agent joins; the read that finds it is due, and the pass does not wait for it.
    reports = [report("a", ["sha256", "tree1"]), report("old")];
    now = 60_000;
    expect(await choice.forPass()).toBe("tree1");
    expect(reads).toBe(2);
    release!();
    await new Promise((r) => setImmediate(r));
    expect(await choice.forPass()).toBe("sha256");
    expect(reads).toBe(2);
  });

  it("keeps its last choice when the reports cannot be read, and starts on sha256", async () => {
    let now = 0;
    let fail = true;
    const choice = new DigestChoice(
      "auto",
      async () => {
        if (fail) throw new Error("store down");
        return [report("a", ["sha256", "tree1"])];
      },
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
    await choice.forPass();
    await new Promise((r) => setImmediate(r));
    expect(choice.current).toBe("tree1");
  });
});
