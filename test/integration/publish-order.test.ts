import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { createObjectStore, type ObjectStore } from "../../shared/adapters/store.js";
import { ClusterError } from "../../shared/adapters/cluster-error.js";
import { readLiveSnapshot } from "../../shared/adapters/snapshot-source.js";
import type { Agent } from "../../shared/agent/agent.js";
import type { FunctionSettings } from "../../shared/app/function-options.js";
import { runPin, runUnpin } from "../../shared/app/pin-command.js";
import type { LiveSnapshot } from "../../shared/app/pass-steps.js";
import { createReconciler, type ReconcileDeps } from "../../shared/app/reconcile.js";
import { runStatus, type FleetStatus } from "../../shared/app/status-command.js";
import { compareConfigKeys, formatConfigName, parseConfigKey } from "../../shared/core/publish/config-key.js";
import type { RenderOptions } from "../../shared/core/settings/options.js";
import { sha256 } from "../../shared/core/publish/sha256.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { A, agentWorld, B, C, count, TOKEN, web, type Node } from "../support/agent.js";
import { dripProxy } from "../support/drip.js";
import { list, service, slice } from "../support/fixtures.js";
import { waitFor } from "../support/net.js";
import { S3RVER_CREDENTIALS } from "../support/s3.js";

// Issue 11: the publish order through real operations, end to end: the reconcile pass against the
// Kubernetes API emulator, s3rver as the store, and real agents running HAProxy.

const world = agentWorld();
const { node, start, served, answering, appliedKey, cleanups } = world;

function memoryLog() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n"))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: "debug" }, stream), lines };
}

/** A cluster with Service `web` whose pods are `hosts` (the echo pods), its kubeconfig in `dir`. */
async function cluster(hosts: string[], options: { resourceVersion?: number; dir?: string } = {}) {
  const api = await new KubeApiEmulator({ resourceVersion: options.resourceVersion }).start();
  cleanups.push(() => api.stop());
  setEndpoints(api, hosts);
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "servicelb-kube-"));
  const kubeconfig = await api.writeKubeconfig({ dir });
  return { api, kubeconfig, dir };
}

/** Service `web` and its one EndpointSlice (always the same object, so that earlier endpoints are replaced). */
function setEndpoints(api: KubeApiEmulator, hosts: string[]): void {
  api.upsert("Service", service("web", [{ port: 80, targetPort: world.pods.port }]) as unknown as KubeObject);
  api.upsert(
    "EndpointSlice",
    slice("web", [{ port: world.pods.port }], hosts, { name: "web" }) as unknown as KubeObject,
  );
}

/** A reconcile function instance publishing to the node's store and pinging its agent. */
function reconciler(
  n: Node,
  kubeconfig: string,
  agent: Agent | null,
  options: Partial<RenderOptions> = {},
  deps: Partial<ReconcileDeps> = {},
  passTimeoutMs = 30_000,
) {
  const settings: FunctionSettings = {
    options: { ...n.lb.options, ...options },
    kubeconfig,
    maxBodyBytes: 1 << 20,
    passTimeoutMs,
    confirmDelayMs: 200,
    digest: "auto",
    store: {
      url: `s3://${world.s3.bucket}/${n.prefix}`,
      endpoint: world.s3.endpoint,
      forcePathStyle: true,
      retain: 50,
    },
    notify: {
      agents: agent ? [agent.url] : [],
      agentPort: "agent",
      token: TOKEN,
      timeoutMs: 2000,
      concurrency: 64,
      deadlineMs: 5000,
    },
  };
  // The node's store is closed by the node's clean-up, so the reconciler is not closed.
  return { settings, reconciler: createReconciler(settings, { log: memoryLog().log, store: n.store, ...deps }) };
}

/** A readSnapshot whose list completes, then waits until released: a pass that overlaps others. */
function slowList(settings: FunctionSettings) {
  let listed!: () => void;
  const hasListed = new Promise<void>((r) => (listed = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let first = true;
  const readSnapshot = async (): Promise<LiveSnapshot> => {
    const snapshot = await readLiveSnapshot(settings.options, { kubeconfig: settings.kubeconfig });
    if (first) {
      first = false;
      listed();
      await released;
    }
    return snapshot;
  };
  return { readSnapshot, hasListed, release };
}

const trigger = (id: string) => ({ id, type: "test" });

describe("a later decision from an equal view wins", () => {
  it("alternating settings at a constant cluster revision: each publish becomes newest and the agent follows each", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A, B]);
    const agent = await start(n);
    const revision = api.resourceVersion;
    const keys: string[] = [];
    for (const [i, balanceAlgorithm] of (["roundrobin", "leastconn", "roundrobin", "leastconn"] as const).entries()) {
      const result = await reconciler(n, kubeconfig, agent, { balanceAlgorithm }).reconciler.reconcileNow(
        trigger(`alternate-${i}`),
      );
      expect(result).toMatchObject({ status: "published", revision, epoch: 0, newestKey: result.key });
      expect((await n.store.latest())?.key).toBe(result.key);
      await appliedKey(agent, result.key!);
      expect(readFileSync(n.configPath, "utf8")).toContain(`balance ${balanceAlgorithm}`);
      keys.push(result.key!);
    }
    expect(api.resourceVersion).toBe(revision);
    // Each records what produced it.
    const heads = await Promise.all(keys.map((k) => n.store.head(k)));
    expect(new Set(heads.map((h) => h.settingsDigest)).size).toBe(2);
    expect((await n.store.readSettings(heads[1]!.settingsDigest!)).options).toMatchObject({
      balanceAlgorithm: "leastconn",
    });
  });
});

describe("stale never wins", () => {
  it("an older pass that finishes after a newer pass that found nothing to change does not publish", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    const agent = await start(n);
    const fast = reconciler(n, kubeconfig, agent);
    const first = await fast.reconciler.reconcileNow(trigger("first"));
    await appliedKey(agent, first.key!);

    const slow = slowList(fast.settings);
    const older = reconciler(n, kubeconfig, agent, {}, { readSnapshot: slow.readSnapshot });
    setEndpoints(api, [B]);
    const olderPass = older.reconciler.reconcileNow(trigger("older"));
    await slow.hasListed;
    // The pod moves back before the older pass publishes: the newer pass renders the same bytes.
    setEndpoints(api, [A]);
    const newer = await fast.reconciler.reconcileNow(trigger("newer"));
    expect(newer).toMatchObject({
      status: "unchanged",
      key: first.key,
      view: expect.stringContaining("/views/000000-"),
    });

    slow.release();
    expect(await olderPass).toMatchObject({ status: "stale", newestKey: first.key });
    expect((await n.store.history()).map((e) => e.key)).toEqual([first.key]);
    await new Promise((r) => setTimeout(r, 300));
    expect(agent.status().applied?.key).toBe(first.key);
    expect(await answering(n, "/web/")).toEqual(["A"]);
  });
});

describe("revisions going back", () => {
  it("converges to a restored cluster at a lower revision within a resync, logs what it detected, and a stale pass of the old cluster still loses", async () => {
    const n = await node();
    const old = await cluster([A], { resourceVersion: 5000 });
    const agent = await start(n);
    const mem = memoryLog();
    const { reconciler: fn, settings } = reconciler(n, old.kubeconfig, agent, {}, { log: mem.log });
    const before = await fn.reconcileNow(trigger("before"));
    await appliedKey(agent, before.key!);
    await served(n, "/web/", "A");

    // A pass of another instance lists the old cluster and is slow to finish.
    const slow = slowList(settings);
    const stalePass = reconciler(
      n,
      old.kubeconfig,
      agent,
      {},
      { readSnapshot: slow.readSnapshot },
    ).reconciler.reconcileNow(trigger("stale"));
    await slow.hasListed;

    // Restored from a backup (or a new cluster behind the same store): lower revisions, other endpoints.
    await old.api.stop();
    const restored = await cluster([B], { resourceVersion: 10, dir: old.dir });
    expect(BigInt(restored.api.resourceVersion) < BigInt(before.revision!)).toBe(true);

    const resync = await fn.reconcileNow(trigger("resync-1"));
    expect(resync).toMatchObject({
      status: "published",
      epoch: 1,
      revision: restored.api.resourceVersion,
      restored: { mark: { epoch: 0, revision: before.revision }, live: restored.api.resourceVersion },
    });
    await appliedKey(agent, resync.key!);
    await served(n, "/web/", "B");
    const warnings = mem.lines.filter((l) => l.level === 40).map((l) => l.msg);
    expect(warnings).toEqual([
      expect.stringMatching(/revision is behind the newest view recorded/),
      expect.stringMatching(/published into epoch 1: the cluster's revisions went back/),
    ]);

    // The stale pass (old cluster, revision far above the restored one) finishes last: it lists again and finds nothing new.
    slow.release();
    expect(await stalePass).toMatchObject({ status: "unchanged", newestKey: resync.key });
    expect(await fn.reconcileNow(trigger("resync-2"))).toMatchObject({ status: "unchanged", key: resync.key });
    expect((await n.store.latest())?.key).toBe(resync.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);
  });
});

describe("keys are not trusted blindly", () => {
  it("garbage and far-future keys are skipped and reported; publishing and agents go on", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    const garbage = `${n.prefix}/configs/99999999999999999999-0000000000000000.cfg`;
    const forged = `${n.prefix}/configs/999999-99999999999999999999-9999999999-${"f".repeat(16)}.cfg`;
    await world.s3.client.send(new PutObjectCommand({ Bucket: world.s3.bucket, Key: garbage, Body: "garbage" }));
    await world.s3.client.send(
      new PutObjectCommand({
        Bucket: world.s3.bucket,
        Key: forged,
        Body: "global\n",
        Metadata: { sha256: sha256("global\n"), revision: "99999999999999999999", epoch: "999999", seq: "9999999999" },
      }),
    );
    const agent = await start(n);
    const { reconciler: fn } = reconciler(n, kubeconfig, agent);

    const first = await fn.reconcileNow(trigger("first"));
    expect(first).toMatchObject({
      status: "published",
      skipped: [
        { key: forged, reason: expect.stringMatching(/epoch 999999 leads the key before it/) },
        { key: garbage, reason: expect.stringMatching(/no sha256/) },
      ],
    });
    await appliedKey(agent, first.key!);
    expect(
      agent
        .status()
        .skipped.map((s) => s.key)
        .sort(),
    ).toEqual([forged, garbage].sort());
    expect(await count(agent.metrics.skippedConfigs)).toBe(2);

    setEndpoints(api, [C]);
    const second = await fn.reconcileNow(trigger("second"));
    expect(second.status).toBe("published");
    await appliedKey(agent, second.key!);
    await served(n, "/web/", "C");

    // Stopped first: s3rver may reset a GET of a status object while the agent replaces it.
    await agent.stop();
    vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
    let out = "";
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
    try {
      // Exit 3: the stopped node's HAProxy is down (the fleet has not converged); the report is printed all the same.
      expect(
        await runStatus({
          store: `s3://${world.s3.bucket}/${n.prefix}`,
          storeEndpoint: world.s3.endpoint,
          storePathStyle: true,
          format: "json",
        }),
      ).toBe(3);
    } finally {
      spy.mockRestore();
      vi.unstubAllEnvs();
    }
    const fleet = JSON.parse(out) as FleetStatus;
    expect(fleet.newest?.key).toBe(second.key);
    expect(fleet.skipped.map((s) => s.key).sort()).toEqual([forged, garbage].sort());
  });

  it("reads a store written by the first key format: the agent runs its newest config and follows the upgraded publisher", async () => {
    const n = await node();
    // What servicelb wrote before epochs and seqs: <revision>-<sha>.cfg with sha256/revision/generator metadata.
    const legacyText = n.renderContext.render(
      snapshotFromDocuments([list(web("web", world.pods.port, [B]), "900")]),
    ).config;
    const legacySha = sha256(legacyText);
    const legacy = `${n.prefix}/configs/${"900".padStart(20, "0")}-${legacySha.slice(0, 16)}.cfg`;
    await world.s3.client.send(
      new PutObjectCommand({
        Bucket: world.s3.bucket,
        Key: legacy,
        Body: legacyText,
        Metadata: { sha256: legacySha, revision: "900", generator: "servicelb/0.0.9" },
      }),
    );
    const agent = await start(n);
    await appliedKey(agent, legacy);
    await served(n, "/web/", "B");

    // The upgraded function's cluster is past 900: an ordinary publish in epoch 0.
    const { kubeconfig } = await cluster([A], { resourceVersion: 1000 });
    const upgraded = await reconciler(n, kubeconfig, agent).reconciler.reconcileNow(trigger("upgraded"));
    expect(upgraded).toMatchObject({ status: "published", epoch: 0 });
    await appliedKey(agent, upgraded.key!);
    await served(n, "/web/", "A");
  });
});

/**
 * Another writer's key (a node holds write access to the store): the object under `from` copied to
 * the key `to` names, its metadata made to agree with that key, so that the publisher's metadata
 * check cannot tell it from a published config. `body` replaces the bytes (the metadata's size kept
 * true), `sha256` the digest the metadata claims.
 */
async function forge(
  n: Node,
  from: string,
  to: { epoch?: number; revision?: string; seq?: number },
  tamper: { body?: string; sha256?: string } = {},
): Promise<string> {
  const source = await world.s3.client.send(new GetObjectCommand({ Bucket: world.s3.bucket, Key: from }));
  const body = tamper.body ?? (await source.Body!.transformToString());
  const name = parseConfigKey(from)!;
  const sha = tamper.sha256 ?? source.Metadata!.sha256!;
  const fields = {
    epoch: to.epoch ?? name.epoch,
    revision: BigInt(to.revision ?? name.revision),
    seq: to.seq ?? name.seq,
  };
  const key = `${n.prefix}/configs/${formatConfigName({ ...fields, shaPrefix: sha.slice(0, 16) })}`;
  await world.s3.client.send(
    new PutObjectCommand({
      Bucket: world.s3.bucket,
      Key: key,
      Body: body,
      Metadata: {
        ...source.Metadata,
        sha256: sha,
        revision: fields.revision.toString(),
        epoch: String(fields.epoch),
        seq: String(fields.seq),
        bytes: String(Buffer.byteLength(body)),
      },
    }),
  );
  return key;
}

/** A forged view marker: what a pass that found nothing to change would leave. */
async function forgeView(n: Node, epoch: number, revision: bigint): Promise<void> {
  const key = `${n.prefix}/views/${String(epoch).padStart(6, "0")}-${revision.toString().padStart(20, "0")}`;
  await world.s3.client.send(
    new PutObjectCommand({ Bucket: world.s3.bucket, Key: key, Body: JSON.stringify({ generator: "forged" }) }),
  );
}

describe("another writer's key never stops publishing (issue 28)", () => {
  it("a valid copy of the newest config under seq 9999999999 is skipped: later passes publish, the agent follows them", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    // Polling often: the agent lists the store, where it meets the forged keys, besides being pinged.
    const agent = await start(n, { pollInterval: "500ms" });
    const fn = reconciler(n, kubeconfig, agent).reconciler;
    const first = await fn.reconcileNow(trigger("first"));
    await appliedKey(agent, first.key!);
    const forged = await forge(n, first.key!, { seq: 9_999_999_999 });

    // A new pod: the next pass publishes past the forged key and reports it.
    setEndpoints(api, [A, B]);
    const second = await fn.reconcileNow(trigger("second"));
    expect(second).toMatchObject({ status: "published", epoch: 0 });
    expect(second.skipped).toEqual([{ key: forged, reason: expect.stringMatching(/seq 9999999999 leads/) }]);
    await appliedKey(agent, second.key!);
    expect(await answering(n, "/web/")).toEqual(["A", "B"]);

    // A later decision from the same view (other settings) sorts below the forged key, and still wins.
    const forgedAgain = await forge(n, second.key!, { seq: 9_999_999_999 });
    const third = await reconciler(n, kubeconfig, agent, { balanceAlgorithm: "leastconn" }).reconciler.reconcileNow(
      trigger("third"),
    );
    expect(third).toMatchObject({ status: "published", revision: second.revision, epoch: 0 });
    expect(compareConfigKeys(third.key!, forgedAgain)).toBeLessThan(0);
    await appliedKey(agent, third.key!);
    expect(readFileSync(n.configPath, "utf8")).toContain("balance leastconn");
    expect((await n.store.latest())?.key).toBe(third.key);
    // Its polls list the forged key above it and skip it: it stays on the newest trusted config.
    // Every 10th poll lists (the others end at newest.json, which names the config it runs): 5 s.
    // A listing made before it ran the third config may have skipped the first forged key.
    await waitFor(
      "the agent skips the forged key",
      async () => (agent.status().skipped.some((s) => s.key === forgedAgain) ? true : undefined),
      20_000,
    );
    expect(agent.status().skipped).toEqual([
      { key: forgedAgain, reason: expect.stringMatching(/seq 9999999999 leads/) },
    ]);
    expect(agent.status().applied?.key).toBe(third.key);
  });

  it("a copy under epoch 999999 is skipped, and the cluster restarted behind the store is converged to in epoch 1", async () => {
    const n = await node();
    const old = await cluster([A], { resourceVersion: 5000 });
    const agent = await start(n);
    const before = await reconciler(n, old.kubeconfig, agent).reconciler.reconcileNow(trigger("before"));
    await appliedKey(agent, before.key!);
    const forged = await forge(n, before.key!, { epoch: 999_999 });

    // The local stack restarted: lower revisions, the pods moved; a cold function instance.
    await old.api.stop();
    const restarted = await cluster([B], { resourceVersion: 10, dir: old.dir });
    const after = await reconciler(n, restarted.kubeconfig, agent).reconciler.reconcileNow(trigger("after"));
    expect(after).toMatchObject({ status: "published", epoch: 1, revision: restarted.api.resourceVersion });
    expect(after.skipped).toEqual([{ key: forged, reason: expect.stringMatching(/epoch 999999 leads/) }]);
    await appliedKey(agent, after.key!);
    await served(n, "/web/", "B");
    expect(await answering(n, "/web/")).toEqual(["B"]);
  });

  it("an agent that runs a key the store does not trust (a ping named it) goes back to the newest trusted config at its next poll", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    // A poll period long enough that the forged key is seen applied before the poll moves it back.
    const agent = await start(n, { pollInterval: "2s" });
    const fn = reconciler(n, kubeconfig, agent).reconciler;
    const first = await fn.reconcileNow(trigger("first"));
    await appliedKey(agent, first.key!);
    // A ping is fetched without a listing, so whoever holds the token can make a node run such a
    // key (as every node did before keys were judged): it orders nothing once the store is listed.
    const forged = await forge(n, first.key!, { epoch: 999_999 });
    expect((await n.notify(agent, { key: forged, sha256: first.sha256! })).status).toBe(202);
    await appliedKey(agent, forged);
    await appliedKey(agent, first.key!);
    setEndpoints(api, [C]);
    const moved = await fn.reconcileNow(trigger("moved"));
    await appliedKey(agent, moved.key!);
    await served(n, "/web/", "C");
  });

  it("forged view markers, one epoch ahead or far ahead in revision, repeated, move no epoch", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    const agent = await start(n);
    const fn = reconciler(n, kubeconfig, agent).reconciler;
    let last = await fn.reconcileNow(trigger("first"));
    const hosts = [[B], [C], [A]];
    for (const [i, pods] of hosts.entries()) {
      await forgeView(n, last.epoch! + 1, BigInt(last.revision!) + 1n);
      await forgeView(n, last.epoch!, 10n ** 19n);
      setEndpoints(api, pods);
      last = await fn.reconcileNow(trigger(`round-${i}`));
      expect(last).toMatchObject({ status: "published", epoch: 0 });
      await appliedKey(agent, last.key!);
      await served(n, "/web/", pods[0] === A ? "A" : pods[0] === B ? "B" : "C");
    }
    // Nothing changed since: no config, and no epoch either.
    expect(await fn.reconcileNow(trigger("quiet"))).toMatchObject({ status: "unchanged", epoch: 0, key: last.key });
  });

  it("a config one revision ahead whose body does not match its digest starts no epoch; the next pod is served", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    const agent = await start(n);
    const fn = reconciler(n, kubeconfig, agent).reconciler;
    const first = await fn.reconcileNow(trigger("first"));
    await appliedKey(agent, first.key!);
    const ahead = (BigInt(first.revision!) + 1n).toString();
    const forged = await forge(
      n,
      first.key!,
      { revision: ahead, seq: 1 },
      { body: "global\n  bogus\n", sha256: sha256("global\n  claimed\n") },
    );

    const quiet = await fn.reconcileNow(trigger("quiet"));
    expect(quiet).toMatchObject({ status: "unchanged", epoch: 0, key: first.key });
    expect(quiet.skipped).toEqual([{ key: forged, reason: expect.stringMatching(/digest/) }]);

    setEndpoints(api, [B]);
    const moved = await fn.reconcileNow(trigger("moved"));
    expect(moved).toMatchObject({ status: "published", epoch: 0 });
    await appliedKey(agent, moved.key!);
    await served(n, "/web/", "B");
  });

  it("a config one revision ahead that verifies but HAProxy refuses costs one epoch, then publishing goes on", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    const agent = await start(n);
    const fn = reconciler(n, kubeconfig, agent).reconciler;
    const first = await fn.reconcileNow(trigger("first"));
    await appliedKey(agent, first.key!);
    const bad = "global\n  no-such-directive\n";
    const ahead = (BigInt(first.revision!) + 1n).toString();
    await forge(n, first.key!, { revision: ahead, seq: 1 }, { body: bad, sha256: sha256(bad) });

    // Indistinguishable from the history of a cluster that went back: the next epoch goes past it.
    const next = await fn.reconcileNow(trigger("next"));
    expect(next).toMatchObject({ status: "published", epoch: 1 });
    await appliedKey(agent, next.key!);
    setEndpoints(api, [C]);
    const moved = await fn.reconcileNow(trigger("moved"));
    expect(moved).toMatchObject({ status: "published", epoch: 1 });
    await appliedKey(agent, moved.key!);
    await served(n, "/web/", "C");
  });
});

/** `servicelb status --format json` on the node's store: its exit code, the report and what it said on stderr. */
async function fleetOf(n: Node): Promise<{ code: number; fleet: FleetStatus; stderr: string }> {
  vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
  let out = "";
  let stderr = "";
  const stdout = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  const errors = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const code = await runStatus({
      store: `s3://${world.s3.bucket}/${n.prefix}`,
      storeEndpoint: world.s3.endpoint,
      storePathStyle: true,
      format: "json",
    });
    return { code, fleet: JSON.parse(out) as FleetStatus, stderr };
  } finally {
    stdout.mockRestore();
    errors.mockRestore();
    vi.unstubAllEnvs();
  }
}

describe("servicelb status while passes fail (issue 28)", () => {
  it("exits 3 and names the last failed pass though every node runs the newest config; 0 after a pass succeeds", async () => {
    const n = await node();
    const { api, kubeconfig } = await cluster([A]);
    const agent = await start(n);
    const first = await reconciler(n, kubeconfig, agent).reconciler.reconcileNow(trigger("first"));
    await appliedKey(agent, first.key!);
    await waitFor("status 0", async () => ((await fleetOf(n)).code === 0 ? true : undefined));

    const refused = new ClusterError("forbidden", 'services is forbidden: User "servicelb" cannot list resource', {
      transient: false,
      status: 403,
    });
    const broken = reconciler(n, kubeconfig, agent, {}, { readSnapshot: () => Promise.reject(refused) }).reconciler;
    for (const id of ["broken-1", "broken-2"])
      await expect(broken.reconcileNow(trigger(id))).rejects.toThrow(/forbidden/);
    // The record is written behind the failed pass, which it does not delay.
    const failing = await waitFor("both failures recorded", async () => {
      const s = await fleetOf(n);
      return s.fleet.function?.failure?.passes === 2 ? s : undefined;
    });
    expect(failing.code).toBe(3);
    expect(failing.fleet.nodes).toEqual([expect.objectContaining({ key: first.key, behind: false })]);
    expect(failing.fleet.function).toMatchObject({
      failure: { stage: "list", passes: 2, message: expect.stringContaining("services is forbidden") },
    });
    expect(failing.stderr).toMatch(/not converged: function: 2 passes failed .*at list: services is forbidden/);

    setEndpoints(api, [B]);
    const fixed = await reconciler(n, kubeconfig, agent).reconciler.reconcileNow(trigger("fixed"));
    await appliedKey(agent, fixed.key!);
    const healthy = await waitFor("status 0 again", async () => {
      const s = await fleetOf(n);
      return s.code === 0 ? s : undefined;
    });
    expect(healthy.fleet.function).toMatchObject({ failure: null });
    expect(healthy.stderr).toBe("");
  });
});

describe("pin and unpin", () => {
  it("every agent runs the pinned config until unpinned; passes still publish meanwhile", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const v2 = await n.publish(web("web", world.pods.port, [B]), 110);
    const agent = await start(n, { pollInterval: "300ms" });
    await appliedKey(agent, v2.key);
    const flags = {
      store: `s3://${world.s3.bucket}/${n.prefix}`,
      storeEndpoint: world.s3.endpoint,
      storePathStyle: true,
    };
    vi.stubEnv("AWS_ACCESS_KEY_ID", S3RVER_CREDENTIALS.accessKeyId);
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", S3RVER_CREDENTIALS.secretAccessKey);
    let out = "";
    const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
    try {
      expect(await runPin("latest~1", { ...flags, reason: "incident 42" })).toBe(0);
      expect(out).toContain(`pinned ${v1.key}`);
      await appliedKey(agent, v1.key);
      await served(n, "/web/", "A");
      expect(agent.status().pinned).toMatchObject({ key: v1.key });

      // A newer config is published and pinged: the agent stays on the pin.
      const v3 = await n.publish(web("web", world.pods.port, [C]), 120);
      expect((await n.notify(agent, v3)).status).toBe(202);
      await new Promise((r) => setTimeout(r, 1200));
      expect(agent.status().applied?.key).toBe(v1.key);
      expect(await answering(n, "/web/")).toEqual(["A"]);
      expect((await n.store.history()).map((e) => e.key)).toEqual([v3.key, v2.key, v1.key]);

      out = "";
      expect(await runStatus({ ...flags, format: "json" })).toBe(0);
      const fleet = JSON.parse(out) as FleetStatus;
      expect(fleet.pin).toMatchObject({ key: v1.key, reason: "incident 42" });
      expect(fleet.nodes).toEqual([expect.objectContaining({ key: v1.key, behind: false })]);

      out = "";
      expect(await runUnpin(flags)).toBe(0);
      expect(out).toContain(`unpinned ${v1.key}`);
      await appliedKey(agent, v3.key);
      await served(n, "/web/", "C");
      expect(agent.status().pinned).toBeNull();
    } finally {
      spy.mockRestore();
      vi.unstubAllEnvs();
    }
  });
});

describe("a pin.json that is not a pin", () => {
  const putPinText = (n: Node, body: string) =>
    world.s3.client.send(new PutObjectCommand({ Bucket: world.s3.bucket, Key: `${n.prefix}/pin.json`, Body: body }));
  const pinError = (agent: Agent) =>
    waitFor("the pin's error", async () =>
      /pin\.json is not a pin/.test(agent.status().lastError?.message ?? "") ? agent.status() : undefined,
    );

  it.each([
    ["not JSON", "{ nope"],
    ["another schema", JSON.stringify({ config: "latest~1" })],
  ])(
    "%s: the agent keeps the last pin it read, says so, and follows again once a valid record says so",
    async (_, body) => {
      const n = await node();
      const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
      const v2 = await n.publish(web("web", world.pods.port, [B]), 110);
      const agent = await start(n, { pollInterval: "200ms" });
      await appliedKey(agent, v2.key);
      await n.store.putPin({ key: v1.key, sha256: v1.sha256, pinnedAt: new Date().toISOString() });
      await appliedKey(agent, v1.key);

      await putPinText(n, body);
      const v3 = await n.publish(web("web", world.pods.port, [C]), 120);
      expect((await n.notify(agent, v3)).status).toBe(202);
      const status = await pinError(agent);
      expect(status).toMatchObject({
        applied: { key: v1.key },
        pinned: { key: v1.key },
        lastError: {
          stage: "pull",
          key: v1.key,
          message: expect.stringContaining(`holding at the last pin, ${v1.key}`),
        },
      });
      // Several polls later it still holds, and still says why.
      await new Promise((r) => setTimeout(r, 1200));
      expect(agent.status()).toMatchObject({ applied: { key: v1.key }, lastError: { stage: "pull" } });
      expect(await answering(n, "/web/")).toEqual(["A"]);

      await n.store.deletePin();
      await appliedKey(agent, v3.key);
      await served(n, "/web/", "C");
      expect(agent.status()).toMatchObject({ pinned: null, lastError: null });
    },
  );

  it("an agent restarted while pin.json is not a pin holds at the config it runs, and says so", async () => {
    const n = await node();
    const v1 = await n.publish(web("web", world.pods.port, [A]), 100);
    const first = await n.start({ pollInterval: "200ms" });
    expect(first.status().applied?.key).toBe(v1.key);
    await first.stop();

    await putPinText(n, "{ nope");
    const v2 = await n.publish(web("web", world.pods.port, [B]), 110);
    const agent = await start(n, { pollInterval: "200ms" });
    expect(agent.status()).toMatchObject({
      applied: { key: v1.key, how: "start" },
      pinned: null,
      lastError: {
        stage: "pull",
        key: null,
        message: expect.stringContaining(`holding at the config it runs, ${v1.key}`),
      },
    });
    await served(n, "/web/", "A");
    await new Promise((r) => setTimeout(r, 1000));
    expect(agent.status().applied?.key).toBe(v1.key);

    // A valid pin decides again: here, to the newest.
    await n.store.putPin({ key: v2.key, sha256: v2.sha256, pinnedAt: new Date().toISOString() });
    await appliedKey(agent, v2.key);
    await served(n, "/web/", "B");
    expect(agent.status()).toMatchObject({ pinned: { key: v2.key }, lastError: null });
  });
});

describe("no wedged pass", () => {
  it("a store that drips bytes fails the pass within its deadline; the next event succeeds", async () => {
    const n = await node();
    const { kubeconfig } = await cluster([A]);
    const proxy = await dripProxy(world.s3.endpoint);
    proxy.dripMs = 300;
    cleanups.push(() => proxy.stop());
    const store: ObjectStore = createObjectStore({
      url: `s3://${world.s3.bucket}/${n.prefix}`,
      endpoint: proxy.endpoint,
      forcePathStyle: true,
      credentials: S3RVER_CREDENTIALS,
    });
    cleanups.push(() => store.close());
    const mem = memoryLog();
    const { reconciler: fn } = reconciler(n, kubeconfig, null, {}, { store, log: mem.log }, 1500);

    proxy.mode = () => "drip";
    const t0 = performance.now();
    await expect(fn.reconcileNow(trigger("dripping"))).rejects.toThrow(
      // A cold instance reads the backend layout from the store before it renders.
      /exceeded its deadline of 1500 ms \(SERVICELB_PASS_TIMEOUT_MS\) at (layout|publish)/,
    );
    // The drip alone would take minutes; the pass gives up at its deadline (plus a loaded machine's slack).
    expect(performance.now() - t0).toBeLessThan(6000);
    expect(mem.lines.find((l) => l.level === 40 && String(l.msg).includes("(transient)"))).toBeDefined();

    proxy.mode = () => "pass";
    const next = await fn.reconcileNow(trigger("next"));
    expect(next.status).toBe("published");
    expect((await n.store.latest())?.key).toBe(next.key);
  });
});
