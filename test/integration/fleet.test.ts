import { tmpdir } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fleet, startFleet } from "../../bench/fleet-run.js";
import { requestCount } from "../../bench/store-proxy.js";
import { requireHaproxy } from "../support/haproxy.js";

/*
 * A fleet in one process (bench/fleet's, not timed): 20 agents as `servicelb agent` runs them,
 * HAProxy faked, against s3rver behind the counting proxy, published to and pinged by the
 * reconcile function's reconciler. Counts only: which config each agent runs, and what each asked
 * of the store per change, against issue 30's bounds.
 */

const AGENTS = 20;
/**
 * The whole config is ~1.4 MB at this size, 20 times the bytes bound: only configs published in
 * chunks (an agent fetches what changed) keep each agent within it.
 */
const SERVICES = 2000;
/** Issue 30: an agent takes an endpoint change in at most 3 store requests and 64 KiB. */
const MAX_REQUESTS = 3;
const MAX_BYTES = 64 * 1024;

let fleet: Fleet;

beforeAll(async () => {
  requireHaproxy();
  // Polls far apart: every request counted during a change is one the change caused.
  fleet = await startFleet({
    agents: AGENTS,
    services: SERVICES,
    pollInterval: "600s",
    statusInterval: "600s",
    dir: tmpdir(),
  });
}, 120_000);

afterAll(() => fleet?.stop());

describe("a fleet of agents", () => {
  it("starts every agent on the published config", async () => {
    expect(fleet.initial.agents.map((a) => a.appliedMs !== undefined)).toEqual(Array(AGENTS).fill(true));
    const { applied } = await fleet.state();
    expect(Object.values(applied).map((a) => a?.sha256)).toEqual(Array(AGENTS).fill(fleet.initial.pass.sha256));
  });

  it.each([1, 2])(
    "takes endpoint change %i onto every agent by its ping, each within the requests and bytes bounds",
    async () => {
      const change = await fleet.change(30_000);
      expect(change.pass.status).toBe("published");
      expect(change.pass.notify).toEqual({ agents: AGENTS, ok: AGENTS, failed: 0 });
      // Every agent runs the newest config, byte for byte: its digest is the one published.
      const { applied } = await fleet.state();
      expect(Object.keys(applied)).toHaveLength(AGENTS);
      for (const a of Object.values(applied))
        expect(a).toEqual({ key: change.key, sha256: change.pass.sha256, how: "runtime" });
      expect(change.agents.filter((a) => a.rescuedByPoll)).toEqual([]);
      expect(change.escapedErrors).toBe(0);
      for (const a of change.agents) {
        expect(requestCount(a.traffic) - a.traffic.statusWrites, a.node).toBeLessThanOrEqual(MAX_REQUESTS);
        expect(a.traffic.bytesDown, a.node).toBeLessThanOrEqual(MAX_BYTES);
        // The ping's GET brought the config: something was downloaded.
        expect(a.traffic.bytesDown, a.node).toBeGreaterThan(0);
      }
    },
  );
});
