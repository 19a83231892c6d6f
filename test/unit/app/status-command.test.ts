import { describe, expect, it } from "vitest";
import { fleetStatus, formatFleet, notConverged, problemLines } from "../../../shared/app/status-command.js";

const newest = {
  key: "p/configs/00000000000000000120-aaaaaaaaaaaaaaaa.cfg",
  revision: "120",
  sha256: "a".repeat(64),
  generator: "g",
  epoch: 0,
  seq: 0,
  settingsDigest: null,
  layoutDigest: null,
};
const now = Date.parse("2026-11-30T12:00:00Z");
const report = (node: string, key: string | null, extra: Record<string, unknown> = {}) => ({
  node,
  applied:
    key === null
      ? null
      : {
          key,
          sha256: "b".repeat(64),
          revision: key.match(/(\d{20})/)![1]!.replace(/^0+/, ""),
          appliedAt: "2026-11-30T11:00:00Z",
          how: "reload",
        },
  lastError: null,
  backoff: null,
  haproxy: { running: true },
  reportIntervalSeconds: 60,
  reportedAt: "2026-11-30T11:59:30Z",
  agent: "servicelb/0.1.0",
  ...extra,
});

describe("fleetStatus", () => {
  it("counts the Gateway certificates every node holds and names those only some hold, which no listener is bound with", () => {
    const f = fleetStatus(
      newest,
      [
        report("node-a", newest.key, { gatewayCertificates: ["default/api-tls", "default/shop-tls"] }),
        report("node-b", newest.key, { gatewayCertificates: ["default/shop-tls"] }),
        report("node-c", newest.key, { gatewayCertificates: ["default/shop-tls"] }),
      ],
      now,
    );
    expect(f.summary.gatewayCertificates).toEqual({
      everywhere: 1,
      partial: [{ ref: "default/api-tls", nodes: 1 }],
    });
    expect(f.nodes[0]!.gatewayCertificates).toEqual(["default/api-tls", "default/shop-tls"]);
    expect(formatFleet(f)).toContain(
      "gateway certificates: 1 on every node; default/api-tls on 1 of 3 nodes (not bound until every node holds it)\n",
    );
    // Agents without --gateway-cert-dir: no line at all.
    const none = fleetStatus(newest, [report("node-a", newest.key)], now);
    expect(none.summary.gatewayCertificates).toBeNull();
    expect(formatFleet(none)).not.toContain("gateway certificates");
  });

  it("marks nodes behind the newest config, without one, or with stale reports, sorted by name", () => {
    const f = fleetStatus(
      newest,
      [
        report("node-c", "p/configs/00000000000000000110-cccccccccccccccc.cfg", {
          lastError: {
            stage: "check",
            key: newest.key,
            message: "haproxy -c rejected the config: boom\nmore",
            at: "2026-11-30T11:59:00Z",
          },
        }),
        report("node-a", newest.key),
        report("node-b", null, { reportedAt: "2026-11-30T11:50:00Z", haproxy: { running: false } }),
        { not: "a status" },
      ],
      now,
    );
    expect(f.newest).toEqual({ key: newest.key, revision: "120" });
    expect(f.nodes.map((n) => [n.node, n.behind, n.stale, n.ageSeconds])).toEqual([
      ["node-a", false, false, 30],
      ["node-b", true, true, 600],
      ["node-c", true, false, 30],
    ]);
    expect(f.unreadable).toHaveLength(1);
    const text = formatFleet(f, { nodes: true });
    expect(text.split("\n")).toEqual([
      `newest: ${newest.key} (revision 120)`,
      "function: no pass recorded",
      "digests: sha256 only: node node-c (servicelb/0.1.0) does not report that it verifies tree1",
      "nodes: 4: 1 current, 1 behind, 1 down (0 HAProxy down, 1 report stale), 1 unknown; 0 pinned",
      "oldest config served: 00000000000000000110-cccccccccccccccc.cfg (revision 110) by 1 node, since 2026-11-30T11:00:00Z",
      expect.stringMatching(/^NODE\s+REVISION\s+STATE\s+HAPROXY\s+REPORTED\s+CONFIG\s+VERIFIES\s+LAST ERROR$/),
      expect.stringMatching(/^node-a\s+120\s+current\s+running\s+30s ago\s+0+120-a{16}\.cfg\s+sha256\s+-$/),
      expect.stringMatching(/^node-b\s+-\s+behind\s+down\s+10m ago \(stale\)\s+-\s+sha256\s+-$/),
      expect.stringMatching(
        /^node-c\s+110\s+behind\s+running\s+30s ago\s+0+110-c{16}\.cfg\s+sha256\s+check: haproxy -c rejected the config: boom$/,
      ),
      'unreadable status report: {"not":"a status"}',
      "",
    ]);
  });

  it("says which nodes verify tree1, which config digest each runs, and which node keeps publishers on sha256", () => {
    const tree1 = { applied: { ...report("x", newest.key).applied!, sha256: `tree1:${"d".repeat(64)}` } };
    const both = { digests: ["sha256", "tree1"] };
    const mixed = fleetStatus(
      newest,
      [report("node-a", newest.key, { ...both, ...tree1 }), report("node-old", newest.key)],
      now,
    );
    expect(mixed.digest).toEqual({
      kind: "sha256",
      reason: "node node-old (servicelb/0.1.0) does not report that it verifies tree1",
    });
    const lines = formatFleet(mixed).split("\n");
    expect(lines[2]).toBe(
      "digests: sha256 only: node node-old (servicelb/0.1.0) does not report that it verifies tree1",
    );
    const table = formatFleet(mixed, { nodes: true }).split("\n");
    expect(table[6]).toMatch(/^node-a\s.*0+120-a{16}\.cfg \(tree1\)\s+sha256,tree1\s+-$/);
    expect(table[7]).toMatch(/^node-old\s.*0+120-a{16}\.cfg\s+sha256\s+-$/);
    const upgraded = fleetStatus(newest, [report("node-a", newest.key, both)], now);
    expect(formatFleet(upgraded).split("\n")[2]).toBe(
      "digests: every node verifies tree1: configs may be published by tree1",
    );
  });

  it("has nobody behind when nothing is published", () => {
    const f = fleetStatus(null, [report("node-a", null)], now);
    expect(f.nodes[0]!.behind).toBe(false);
    expect(formatFleet(f)).toMatch(/^newest: no config published\n/);
  });
});

describe("the summary", () => {
  const older = "p/configs/00000000000000000100-dddddddddddddddd.cfg";
  const oldest = "p/configs/00000000000000000090-eeeeeeeeeeeeeeee.cfg";
  const pinnedAt = "2026-11-30T10:00:00Z";
  const applied = (key: string, appliedAt: string) => ({
    applied: { ...report("x", key).applied!, appliedAt },
  });

  it("counts each node once as current, behind or down, and the pins they hold", () => {
    const f = fleetStatus(
      newest,
      [
        report("node-a", newest.key),
        report("node-b", newest.key, { pinned: { key: newest.key, pinnedAt } }),
        report("node-c", older),
        report("node-d", null),
        report("node-e", newest.key, { haproxy: { running: false } }),
        // Down outweighs behind: what a stale node serves now is not known.
        report("node-f", older, { reportedAt: "2026-11-30T11:50:00Z" }),
      ],
      now,
    );
    expect(f.summary).toEqual({
      nodes: 6,
      current: 2,
      behind: 2,
      down: 2,
      haproxyDown: 1,
      stale: 1,
      pinned: 1,
      unknown: 0,
      oldestServed: { key: older, revision: "100", nodes: 1, since: "2026-11-30T11:00:00Z" },
      gatewayCertificates: null,
    });
    expect(formatFleet(f).split("\n").slice(3, 5)).toEqual([
      "nodes: 6: 2 current, 2 behind, 2 down (1 HAProxy down, 1 report stale); 1 pinned",
      "oldest config served: 00000000000000000100-dddddddddddddddd.cfg (revision 100) by 1 node, since 2026-11-30T11:00:00Z",
    ]);
  });

  it("names the oldest config nodes that are not down serve, by key order, and the earliest apply of it", () => {
    const f = fleetStatus(
      newest,
      [
        report("node-a", older, applied(older, "2026-11-30T09:30:00Z")),
        report("node-b", oldest, applied(oldest, "2026-11-30T08:00:00Z")),
        report("node-c", oldest, applied(oldest, "2026-11-30T07:00:00Z")),
        // Older still, but its HAProxy is down: it serves nothing.
        report("node-d", "p/configs/00000000000000000010-ffffffffffffffff.cfg", { haproxy: { running: false } }),
      ],
      now,
    );
    expect(f.summary.oldestServed).toEqual({ key: oldest, revision: "90", nodes: 2, since: "2026-11-30T07:00:00Z" });
    expect(fleetStatus(newest, [report("node-a", null)], now).summary.oldestServed).toBeNull();
    expect(formatFleet(fleetStatus(newest, [], now))).toContain(
      "nodes: 0: 0 current, 0 behind, 0 down; 0 pinned\noldest config served: none known\n",
    );
  });

  it("keeps the per-node table behind --nodes, and names at most ten nodes on stderr without it", () => {
    const reports = Array.from({ length: 12 }, (_, i) => report(`node-${String(i).padStart(2, "0")}`, older));
    const f = fleetStatus(newest, reports, now);
    expect(formatFleet(f)).not.toMatch(/^NODE\s/m);
    expect(formatFleet(f, { nodes: true }).match(/^node-\d\d\s/gm)).toHaveLength(12);
    const short = problemLines(f, false);
    expect(short).toHaveLength(11);
    expect(short.slice(0, 10)).toEqual(notConverged(f).slice(0, 10));
    expect(short[10]).toBe("and 2 more nodes (`servicelb status --nodes` lists every node)");
    expect(problemLines(f, true)).toEqual(notConverged(f));
  });
});

describe("notConverged", () => {
  it("names each node behind, with HAProxy down or a stale report; nothing when all serve the newest", () => {
    const f = fleetStatus(
      newest,
      [
        report("node-a", newest.key),
        report("node-b", "p/configs/00000000000000000110-cccccccccccccccc.cfg"),
        report("node-c", newest.key, { haproxy: { running: false } }),
        report("node-d", newest.key, { reportedAt: "2026-11-30T11:50:00Z" }),
      ],
      now,
    );
    expect(notConverged(f)).toEqual([
      "node-b: behind the newest config",
      "node-c: HAProxy down",
      "node-d: report stale (agent gone or cut off from the store)",
    ]);
    expect(notConverged(fleetStatus(newest, [report("node-a", newest.key)], now))).toEqual([]);
  });

  it("is not converged while no agent has reported", () => {
    expect(notConverged(fleetStatus(newest, [], now))).toEqual(["no agent has reported to the store"]);
  });

  it("counts a node that runs a skipped key as behind, though the key sorts after the newest", () => {
    const forged = "p/configs/999999-00000000000000000120-0000000000-aaaaaaaaaaaaaaaa.cfg";
    const f = fleetStatus(newest, [report("node-a", forged)], now, {
      skipped: [{ key: forged, reason: "epoch 999999 leads the key before it (epoch 0) by more than 1" }],
    });
    expect(notConverged(f)).toEqual(["node-a: behind the newest config"]);
    expect(formatFleet(f)).toContain(`skipped key (not trusted or does not verify): ${forged}: epoch 999999 leads`);
  });

  it("is not converged while the function's passes fail, whatever the nodes run", () => {
    const pass = {
      at: "2026-11-30T11:59:40Z",
      generator: "servicelb/0.1.0",
      failure: {
        since: "2026-11-30T11:58:00Z",
        passes: 3,
        stage: "publish",
        message: "S3 put of s3://b/p/configs/x.cfg failed: Access Denied (AccessDenied, HTTP 403)\nmore",
        transient: false,
        eventId: "e-1",
      },
    };
    const f = fleetStatus(newest, [report("node-a", newest.key)], now, { pass });
    const why =
      "3 passes failed since 2026-11-30T11:58:00Z, the last at 2026-11-30T11:59:40Z at publish: S3 put of s3://b/p/configs/x.cfg failed: Access Denied (AccessDenied, HTTP 403)";
    expect(notConverged(f)).toEqual([`function: ${why}`]);
    expect(formatFleet(f).split("\n")[1]).toBe(`function: FAILING: ${why}`);
    const one = fleetStatus(newest, [], now, { pass: { ...pass, failure: { ...pass.failure, passes: 1 } } });
    expect(notConverged(one)[0]).toMatch(/^function: 1 pass failed, the last at 2026-11-30T11:59:40Z at publish: /);

    const ok = fleetStatus(newest, [report("node-a", newest.key)], now, { pass: { ...pass, failure: null } });
    expect(notConverged(ok)).toEqual([]);
    expect(formatFleet(ok).split("\n")[1]).toBe("function: last pass 2026-11-30T11:59:40Z succeeded");
    const unreadable = fleetStatus(newest, [report("node-a", newest.key)], now, { passUnreadable: "not JSON" });
    expect(notConverged(unreadable)).toEqual(["function: its record cannot be read: not JSON"]);
  });
});

describe("fleetStatus with records the store would not give", () => {
  it("counts them as unknown, names them among the reasons, and keeps every node it read", () => {
    const f = fleetStatus(newest, [report("node-a", newest.key), "not json at all"], now, {
      unread: [{ node: "node-b", error: "S3 get of s3://b/p/status/node-b.json failed: HTTP 503 SlowDown" }],
    });
    expect(f.summary).toMatchObject({ nodes: 3, current: 1, behind: 0, down: 0, unknown: 2 });
    expect(f.nodes.map((n) => n.node)).toEqual(["node-a"]);
    expect(notConverged(f)).toEqual([
      "node-b: report cannot be read: S3 get of s3://b/p/status/node-b.json failed: HTTP 503 SlowDown",
      'a status report that is not one: "not json at all"',
    ]);
    expect(formatFleet(f)).toContain("unread status report: node-b: S3 get of");

    const none = fleetStatus(newest, [], now, { unread: [{ node: "node-b", error: "timeout" }] });
    expect(notConverged(none)).toEqual(["node-b: report cannot be read: timeout"]);
  });
});

describe("fleetStatus with a canary rollout", () => {
  const stable = "p/configs/000000-00000000000000000110-0000000000-cccccccccccccccc.cfg";
  const candidate = newest.key;
  const rollout = {
    version: 1 as const,
    stable: { key: stable, sha256: "c".repeat(64) },
    rollout: {
      id: candidate,
      candidate: { key: candidate, sha256: "a".repeat(64) },
      state: "rolling" as const,
      wave: 0,
      sizes: [1, 3],
      order: ["node-b", "node-a", "node-c"],
      startedAt: "2026-11-30T11:58:00Z",
      waveStartedAt: "2026-11-30T11:58:00Z",
      reason: null,
      gate: null,
    },
    rejected: [],
    blocked: null,
    history: [],
    updatedAt: "2026-11-30T11:58:00Z",
  };

  it("holds each node to the config the rollout names for it, and shows its wave", () => {
    const f = fleetStatus(
      newest,
      [report("node-a", stable), report("node-b", candidate), report("node-c", candidate)],
      now,
      {
        rollout,
      },
    );
    expect(f.nodes.map((n) => [n.node, n.behind, n.wave])).toEqual([
      ["node-a", false, { wave: 2, candidate: false }],
      ["node-b", false, { wave: 1, candidate: true }],
      ["node-c", true, { wave: 2, candidate: false }],
    ]);
    const text = formatFleet(f, { nodes: true });
    expect(text).toContain(
      "rollout: ROLLING; wave 1 of 2, 1 of 3 nodes on 00000000000000000120-aaaaaaaaaaaaaaaa.cfg (`servicelb rollout status`)\n",
    );
    expect(text).toMatch(/node-b +120 +current \(wave 1, canary\)/);
    expect(notConverged(f)).toEqual(["node-c: not on the config the rollout names for its wave"]);
  });
});
