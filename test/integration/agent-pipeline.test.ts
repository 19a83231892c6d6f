import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { HaproxyProcess } from "../../shared/adapters/haproxy/process.js";
import type { ObjectStore } from "../../shared/adapters/store.js";
import { stateFilePath } from "../../shared/agent/options.js";
import { A, agentWorld, B, C, count, web } from "../support/agent.js";
import { waitFor } from "../support/net.js";

// The agent's fast paths against a real HAProxy and s3rver: the key a ping names is fetched
// without listing the store, and an endpoint change goes live and is written without
// `haproxy -c`. A wrapper around haproxy holds (or fails) the checks of chosen configs, so the
// order of events is forced rather than timed.

const world = agentWorld();
const { node, start, served, answering, appliedKey, cleanups } = world;

/** The node's store, counting how often it is listed. */
function countingStore(store: ObjectStore): { store: ObjectStore; lists: () => number; gets: () => number } {
  let lists = 0;
  let gets = 0;
  return {
    store: {
      ...store,
      history: (o) => {
        lists++;
        return store.history(o);
      },
      get: (key) => {
        gets++;
        return store.get(key);
      },
    },
    lists: () => lists,
    gets: () => gets,
  };
}

/**
 * The node's store, except that it is unreachable while `down` is set, and that the next GET of
 * a key passed to holdGet() waits until released (reached resolves when it starts waiting).
 */
function gatedStore(store: ObjectStore) {
  let down = false;
  const holds = new Map<string, { reach: () => void; released: Promise<void> }>();
  const unreachable = () => Promise.reject(new Error("the test's store is unreachable"));
  return {
    store: {
      ...store,
      history: (o) => (down ? unreachable() : store.history(o)),
      get: async (key) => {
        if (down) return unreachable();
        const hold = holds.get(key);
        if (hold) {
          holds.delete(key);
          hold.reach();
          await hold.released;
        }
        return store.get(key);
      },
    } satisfies ObjectStore,
    setDown: (d: boolean) => (down = d),
    holdGet(key: string) {
      let reach!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((r) => (reach = r));
      holds.set(key, { reach, released: new Promise<void>((r) => (release = r)) });
      return { reached, release };
    },
  };
}

/**
 * `haproxy` for the agent, except that `haproxy -c` of a config naming `address` waits while the
 * file `<dir>/hold` exists, and fails (as HAProxy would on a bad config) while `<dir>/reject`
 * exists. Each check of such a config is logged to `<dir>/checks`.
 */
function checkGate(dir: string, address: string) {
  const bin = join(dir, "haproxy-gated");
  const hold = join(dir, "hold");
  const reject = join(dir, "reject");
  writeFileSync(
    bin,
    `#!/bin/sh
if [ "$1" = "-c" ] && grep -q ' ${address}:' "$3"; then
  echo check >> '${join(dir, "checks")}'
  while [ -e '${hold}' ]; do sleep 0.02; done
  if [ -e '${reject}' ]; then
    echo "[ALERT]    (1) : config : the test's gate rejects ${address}" >&2
    exit 1
  fi
fi
exec haproxy "$@"
`,
  );
  chmodSync(bin, 0o755);
  return {
    bin,
    hold: () => writeFileSync(hold, ""),
    release: () => rmSync(hold, { force: true }),
    reject: () => writeFileSync(reject, ""),
    checks: () =>
      existsSync(join(dir, "checks"))
        ? readFileSync(join(dir, "checks"), "utf8").split("\n").filter(Boolean).length
        : 0,
  };
}

describe("the key a ping names", () => {
  it("is fetched with one GET, without listing the store", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const counted = countingStore(n.store);
    const agent = await start(n, {}, { store: counted.store });
    const listsAtStart = counted.lists();

    const moved = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, moved);
    await appliedKey(agent, moved.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    const structural = await n.publish([...web("web", world.pods.port, [B]), ...web("api", world.pods.port, [C])], 120);
    await n.notify(agent, structural);
    await appliedKey(agent, structural.key);
    await served(n, "/api/", "C");

    expect(counted.lists()).toBe(listsAtStart);
    expect(await count(agent.metrics.notifiedPulls, { result: "fetched" })).toBe(2);
    expect(await count(agent.metrics.notifiedPulls, { result: "fallback" })).toBe(0);
  });

  it("falls back to listing on a bogus, foreign or mismatched key, records nothing against it, and ignores stale keys", async () => {
    const n = await node();
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const counted = countingStore(n.store);
    const agent = await start(n, {}, { store: counted.store });

    // Well-formed, sorts after every real key, not in the store.
    const bogus = { key: `${n.prefix}/configs/00000000009999999999-0123456789abcdef.cfg`, sha256: "0".repeat(64) };
    const lists = counted.lists();
    expect(await n.notify(agent, bogus)).toMatchObject({ status: 202 });
    await waitFor("the fallback listing", async () => (counted.lists() > lists ? true : undefined));
    await waitFor("the fallback counted", async () =>
      (await count(agent.metrics.notifiedPulls, { result: "fallback" })) === 1 ? true : undefined,
    );
    expect(agent.status()).toMatchObject({ applied: { key: first.key }, lastError: null, backoff: null });

    // A real config whose key sorts before the bogus one is still applied at once.
    const next = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, next);
    await appliedKey(agent, next.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);

    // The ping's sha256 differs from the stored config's: listed instead, and the store's own verified config applied.
    const third = await n.publish(web("web", world.pods.port, [C]), 120);
    await n.notify(agent, { key: third.key, sha256: "f".repeat(64) });
    await appliedKey(agent, third.key);
    expect(await count(agent.metrics.notifiedPulls, { result: "fallback" })).toBe(2);

    // Another prefix (not this store's), sorting after this one: listed instead.
    const fourth = await n.publish(web("web", world.pods.port, [A]), 130);
    await n.notify(agent, { key: fourth.key.replace(n.prefix, "zz-elsewhere"), sha256: fourth.sha256 });
    await appliedKey(agent, fourth.key);

    // A stale key: nothing to do.
    const gets = counted.gets();
    const listsBefore = counted.lists();
    const stale = await n.notify(agent, first);
    expect(JSON.parse(stale.body)).toMatchObject({ action: "current" });
    expect([counted.gets(), counted.lists()]).toEqual([gets, listsBefore]);
    expect(agent.status()).toMatchObject({ applied: { key: fourth.key }, lastError: null, backoff: null });
    expect(await count(agent.metrics.applyFailures)).toBe(0);
  });
});

describe("endpoint changes", () => {
  it("go live and are written at once, with no haproxy -c and no reload", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const before = await n.reloads();

    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await appliedKey(agent, toB.key);
    expect(agent.status()).toMatchObject({ applied: { how: "runtime" }, lastError: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toB.key)).config);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    expect(gate.checks()).toBe(0);
    expect(await n.reloads()).toBe(before);
  });

  it("a structural change after them is checked and reloaded from what runs", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const before = await n.reloads();

    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await appliedKey(agent, toB.key);
    const structural = await n.publish([...web("web", world.pods.port, [B]), ...web("api", world.pods.port, [C])], 120);
    await n.notify(agent, structural);
    await appliedKey(agent, structural.key);
    expect(agent.status().applied).toMatchObject({ how: "reload" });
    expect(gate.checks()).toBe(1);
    expect(await n.reloads()).toBe(before + 1);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    await served(n, "/api/", "C");
  });
});

describe("newest wins (invariant 1)", () => {
  it("never applies an older key a late ping names, while a failed config backs off and a newer one runs", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const gated = gatedStore(n.store);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin }, { store: gated.store });

    // k6 adds a Service (a reload): its haproxy -c is held, then fails.
    gate.hold();
    gate.reject();
    const k6 = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [B])], 110);
    await n.notify(agent, k6);
    await waitFor("k6's check held", async () => (gate.checks() === 1 ? true : undefined));
    // An older snapshot's config, published before k7 but named by a ping that arrives late.
    const late = await n.publish(web("web", world.pods.port, [A, C]), 120);
    const k7 = await n.publish(web("web", world.pods.port, [C]), 130);
    await n.notify(agent, k7);

    // k6's check fails and k6 backs off; k7 is pulled next, and the late ping comes meanwhile.
    const held = gated.holdGet(k7.key);
    gate.release();
    await held.reached;
    const pulls = await count(agent.metrics.pulls);
    expect(JSON.parse((await n.notify(agent, late)).body)).toMatchObject({ action: "pulling" });
    held.release();

    // k7, then the pull the ping asked for.
    await waitFor("k7 applied and the ping's pull done", async () =>
      (await count(agent.metrics.pulls)) >= pulls + 2 && agent.status().applied?.key === k7.key ? true : undefined,
    );
    expect(await count(agent.metrics.applyFailures, { stage: "check" })).toBe(1);
    expect(await answering(n, "/web/")).toEqual(["C"]);
    await new Promise((r) => setTimeout(r, 300));
    expect(agent.status()).toMatchObject({ applied: { key: k7.key } });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(k7.key)).config);
    expect(await answering(n, "/web/")).toEqual(["C"]);
  });

  it("does not trust a ping's key while the running config is unknown (file written, not recorded): lists the store", async () => {
    const n = await node();
    const older = await n.publish(web("web", world.pods.port, [A]), 100);
    const newest = await n.publish(web("web", world.pods.port, [B]), 110);
    // A crash between writing newest's file and recording it: the state still names older.
    const options = n.options();
    mkdirSync(options.stateDir, { recursive: true });
    mkdirSync(dirname(n.configPath), { recursive: true });
    writeFileSync(n.configPath, (await n.store.get(newest.key)).config);
    writeFileSync(
      stateFilePath(options),
      JSON.stringify({
        applied: {
          key: older.key,
          sha256: older.sha256,
          revision: "100",
          appliedAt: new Date().toISOString(),
          how: "reload",
        },
        lastError: null,
      }),
    );
    // The store is unreachable at start: HAProxy serves the file, whose key the agent cannot name.
    const gated = gatedStore(n.store);
    gated.setDown(true);
    const agent = await start(n, {}, { store: gated.store });
    expect(agent.status().applied).toMatchObject({ key: null, how: "start" });
    await served(n, "/web/", "B");

    gated.setDown(false);
    await n.notify(agent, older);
    const applied = await waitFor("a key recorded", async () => agent.status().applied?.key ?? undefined);
    expect(applied).toBe(newest.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    expect(await count(agent.metrics.notifiedPulls, { result: "fetched" })).toBe(0);
  });
});

describe("HAProxy restarted, runtime undo failed", () => {
  it("after a supervised restart, HAProxy runs the file, which holds the last endpoint change; later diffs start from what runs", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);

    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await appliedKey(agent, toB.key);
    // Crash (OOM, ...): the supervisor restarts HAProxy on the file.
    const master = (await showProc(n.masterSocket)).master.pid;
    process.kill(master, "SIGKILL");
    await waitFor("HAProxy restarted", async () => {
      const s = await showProc(n.masterSocket, { timeoutMs: 500 });
      return s.master.pid !== master && s.workers.length > 0 ? true : undefined;
    });
    await served(n, "/web/", "B");
    expect(agent.status()).toMatchObject({ applied: { key: toB.key } });

    const toBC = await n.publish(web("web", world.pods.port, [B, C]), 120);
    await n.notify(agent, toBC);
    await appliedKey(agent, toBC.key);
    expect(agent.status().applied).toMatchObject({ how: "runtime" });
    expect(await answering(n, "/web/")).toEqual(["B", "C"]);
  });

  it("applies a config that failed while HAProxy was down as soon as HAProxy is back, not after its backoff", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    // A restart delay long enough to publish and ping in between; the backoff (60 s) far longer than the test.
    const agent = await start(n, {}, { haproxy: { restartDelayMs: 3000, stopGraceMs: 3000, killGraceMs: 2000 } });
    const master = (await showProc(n.masterSocket)).master.pid;
    process.kill(master, "SIGKILL");
    await waitFor("HAProxy down", async () =>
      (await showProc(n.masterSocket, { timeoutMs: 200 }).catch(() => null)) === null ? true : undefined,
    );
    const next = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [B])], 110);
    await n.notify(agent, next);
    await waitFor("the failed apply", async () => (agent.status().lastError?.key === next.key ? true : undefined));
    expect(agent.status().backoff).toMatchObject({ key: next.key });
    await appliedKey(agent, next.key);
    await served(n, "/api/", "B");
  });
});

describe("stopping", () => {
  it("stops promptly while a haproxy -c is held, a poll runs and pings keep coming; the check is abandoned", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin, pollInterval: "100ms" });
    cleanups.push(() => gate.release());
    const firstText = readFileSync(n.configPath, "utf8");

    gate.hold();
    const structural = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [B])], 110);
    await n.notify(agent, structural);
    await waitFor("the check held", async () => (gate.checks() === 1 ? true : undefined));
    // Past a poll tick (100-120 ms): that poll run joins the loop, which waits for the check.
    await new Promise((r) => setTimeout(r, 300));

    const next = await n.publish(web("web", world.pods.port, [B, C]), 120);
    let pinging = true;
    const pinger = (async () => {
      while (pinging) {
        await n.notify(agent, next).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const t0 = Date.now();
    const outcome = await Promise.race([
      agent.stop().then(() => "stopped"),
      new Promise((r) => setTimeout(() => r("still stopping"), 5000)),
    ]);
    pinging = false;
    await pinger;
    expect(outcome).toBe("stopped");
    expect(Date.now() - t0).toBeLessThan(5000);
    // The unchecked config was never written.
    expect(readFileSync(n.configPath, "utf8")).toBe(firstText);
    expect(agent.status().haproxy.running).toBe(false);
  });
});

describe("reload confirmation", () => {
  it("confirms a reload by show proc (count up, failed 0) and reports a failed one, now polled every 10 ms", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n);
    await agent.stop();
    // The agent left a valid config on disk; drive HAProxy directly.
    const proc = new HaproxyProcess({
      configPath: n.configPath,
      masterSocket: n.masterSocket,
      stopGraceMs: 2000,
      killGraceMs: 2000,
    });
    await proc.start();
    cleanups.push(() => proc.stop());
    const ok = await proc.reload();
    expect(ok).toMatchObject({ ok: true, reloadsAfter: ok.reloadsBefore + 1 });
    expect(ok.status.master.failedReloads).toBe(0);
    const good = readFileSync(n.configPath, "utf8");
    writeFileSync(n.configPath, `${good}\nbackend broken\n    nosuchdirective on\n`);
    const failed = await proc.reload();
    expect(failed).toMatchObject({ ok: false, reloadsAfter: failed.reloadsBefore + 1 });
    writeFileSync(n.configPath, good);
    expect(await proc.reload()).toMatchObject({ ok: true });
  });
});
