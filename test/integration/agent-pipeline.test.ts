import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { HaproxyProcess } from "../../shared/adapters/haproxy/process.js";
import type { ObjectStore } from "../../shared/adapters/object-store.js";
import { statsSocketOf } from "../../shared/agent/config-facts.js";
import { stateFilePath } from "../../shared/agent/options.js";
import { A, agentWorld, B, C, count, web } from "../support/agent.js";
import { waitFor } from "../support/net.js";

// The agent's fast paths against a real HAProxy and s3rver: the key a ping names is fetched
// without listing the store, and an endpoint change does not wait for the previous one's
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
 * exists, and is killed (no verdict) while `<dir>/crash` exists. Each check of such a config is
 * logged to `<dir>/checks`.
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
  # As if the check could not run to a verdict (OOM-killed, timed out...).
  if [ -e '${join(dir, "crash")}' ]; then kill -KILL $$; fi
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
    crash: (on = true) => (on ? writeFileSync(join(dir, "crash"), "") : rmSync(join(dir, "crash"), { force: true })),
    checks: () => (existsSync(join(dir, "checks")) ? readFileSync(join(dir, "checks"), "utf8").split("\n").filter(Boolean).length : 0),
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
    await waitFor("the fallback counted", async () => ((await count(agent.metrics.notifiedPulls, { result: "fallback" })) === 1 ? true : undefined));
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

describe("endpoint changes while the previous one is checked", () => {
  it("serves a follow-up change before the previous change's haproxy -c has finished; writes each only after its check", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const firstText = readFileSync(n.configPath, "utf8");
    const before = await n.reloads();

    gate.hold();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    await waitFor("B's check held", async () => (gate.checks() === 1 ? true : undefined));
    // Live through the runtime API, but neither recorded nor written until haproxy -c agrees.
    expect(agent.status().applied?.key).toBe(first.key);
    expect(readFileSync(n.configPath, "utf8")).toBe(firstText);

    // The next change does not wait for that check.
    const toBC = await n.publish(web("web", world.pods.port, [B, C]), 120);
    await n.notify(agent, toBC);
    await waitFor("B and C serving", async () => ((await answering(n, "/web/")).join() === "B,C" ? true : undefined));
    expect(agent.status().applied?.key).toBe(first.key);
    expect(readFileSync(n.configPath, "utf8")).toBe(firstText);

    gate.release();
    await appliedKey(agent, toBC.key);
    expect(agent.status()).toMatchObject({ applied: { how: "runtime" }, lastError: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toBC.key)).config);
    expect(await count(agent.metrics.runtimeUpdates)).toBe(2);
    expect(await n.reloads()).toBe(before);
  });

  it("undoes a change whose background check fails, with the change applied on top of it, then re-applies the newer one", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const firstText = readFileSync(n.configPath, "utf8");
    const before = await n.reloads();

    // Only B's configs are rejected; C's on top of B is fine by itself.
    gate.hold();
    gate.reject();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    const toC = await n.publish(web("web", world.pods.port, [C]), 120);
    await n.notify(agent, toC);
    await served(n, "/web/", "C");

    gate.release();
    await appliedKey(agent, toC.key);
    expect(await answering(n, "/web/")).toEqual(["C"]);
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toC.key)).config);
    expect(await count(agent.metrics.applyFailures, { stage: "check" })).toBe(1);
    expect(await n.reloads()).toBe(before);
    expect(firstText).not.toBe(readFileSync(n.configPath, "utf8"));
  });

  it("undoes a lone change whose background check fails and keeps the last good file", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const firstText = readFileSync(n.configPath, "utf8");

    gate.hold();
    gate.reject();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    gate.release();
    const err = await waitFor("the check error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({ stage: "check", key: toB.key, message: expect.stringContaining("gate rejects") });
    expect(agent.status()).toMatchObject({ applied: { key: first.key }, backoff: { key: toB.key } });
    expect(await answering(n, "/web/")).toEqual(["A"]);
    expect(readFileSync(n.configPath, "utf8")).toBe(firstText);
  });

  it("checks, writes and counts a live config once when it is pulled again under a newer key (same bytes) during its check", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });

    gate.hold();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    await waitFor("B's check held", async () => (gate.checks() === 1 ? true : undefined));
    // Back to B's bytes under a newer key (C's config was never pulled here).
    await n.publish(web("web", world.pods.port, [C]), 120);
    const textB = (await n.store.get(toB.key)).config;
    const againB = await n.store.publish({ config: textB, revision: "130", generator: "servicelb/test" });
    expect(againB.status).toBe("published");
    await n.notify(agent, againB);
    await waitFor("B's bytes pulled again", async () => ((await count(agent.metrics.notifiedPulls, { result: "fetched" })) === 2 ? true : undefined));

    gate.release();
    await appliedKey(agent, againB.key);
    await new Promise((r) => setTimeout(r, 300));
    expect(gate.checks()).toBe(1);
    expect(await count(agent.metrics.runtimeUpdates)).toBe(1);
    expect(agent.status()).toMatchObject({ applied: { key: againB.key, how: "runtime" }, lastError: null });
    expect(readFileSync(n.configPath, "utf8")).toBe(textB);
    expect(await answering(n, "/web/")).toEqual(["B"]);
  });

  it("keeps a live change whose haproxy -c cannot run to a verdict, reports it and checks it again later", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin }, { backoff: { initialMs: 200, maxMs: 400 } });
    const firstText = readFileSync(n.configPath, "utf8");
    const before = await n.reloads();

    gate.crash();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    const err = await waitFor("the check error", async () => agent.status().lastError ?? undefined);
    expect(err).toMatchObject({ stage: "check", key: toB.key, message: expect.stringContaining("haproxy -c could not run") });
    // Not a verdict on the config: the change stays live, unrecorded and unwritten.
    expect(await answering(n, "/web/")).toEqual(["B"]);
    expect(agent.status()).toMatchObject({ applied: { key: first.key }, backoff: null });
    expect(readFileSync(n.configPath, "utf8")).toBe(firstText);
    await waitFor("checked again", async () => (gate.checks() >= 2 ? true : undefined));
    expect(await answering(n, "/web/")).toEqual(["B"]);

    gate.crash(false);
    await appliedKey(agent, toB.key);
    expect(agent.status()).toMatchObject({ applied: { how: "runtime" }, lastError: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toB.key)).config);
    expect(await count(agent.metrics.applyFailures)).toBe(0);
    expect(await count(agent.metrics.checksUnavailable)).toBeGreaterThanOrEqual(1);
    expect(await n.reloads()).toBe(before);
  });

  it("lets a structural change supersede a change still in its check: the reload runs the new file", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const before = await n.reloads();

    gate.hold();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    // Without B: its check is not held.
    const structural = await n.publish([...web("web", world.pods.port, [C]), ...web("api", world.pods.port, [A])], 120);
    await n.notify(agent, structural);
    await appliedKey(agent, structural.key);
    await served(n, "/api/", "A");
    expect(await answering(n, "/web/")).toEqual(["C"]);
    expect(agent.status()).toMatchObject({ applied: { how: "reload" }, lastError: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(structural.key)).config);
    expect(await n.reloads()).toBe(before + 1);
    gate.release();
    // B's check was abandoned: nothing recorded for it, nothing written.
    await new Promise((r) => setTimeout(r, 300));
    expect(agent.status()).toMatchObject({ applied: { key: structural.key }, lastError: null });
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(structural.key)).config);
  });
});

describe("newest wins (invariant 1)", () => {
  it("never applies an older key a late ping names, while a failed config backs off and a newer one runs", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const gated = gatedStore(n.store);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin }, { store: gated.store });

    gate.hold();
    gate.reject();
    const k6 = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, k6);
    await served(n, "/web/", "B");
    // An older snapshot's config, published before k7 but named by a ping that arrives late.
    const late = await n.publish(web("web", world.pods.port, [A, C]), 120);
    const k7 = await n.publish(web("web", world.pods.port, [C]), 130);
    await n.notify(agent, k7);
    await served(n, "/web/", "C");

    // k6's check fails: both are undone, k6 backs off and k7 is pulled again; meanwhile the late ping.
    const held = gated.holdGet(k7.key);
    gate.release();
    await held.reached;
    const pulls = await count(agent.metrics.pulls);
    expect(JSON.parse((await n.notify(agent, late)).body)).toMatchObject({ action: "pulling" });
    held.release();

    // k7 pulled again, then the pull the ping asked for.
    await waitFor("k7 applied and the ping's pull done", async () => ((await count(agent.metrics.pulls)) >= pulls + 2 && agent.status().applied?.key === k7.key ? true : undefined));
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
      JSON.stringify({ applied: { key: older.key, sha256: older.sha256, revision: "100", appliedAt: new Date().toISOString(), how: "reload" }, lastError: null }),
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
  it("after a supervised restart (which runs the file), applies the newest config again instead of trusting the live state it lost", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });

    gate.hold();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    await waitFor("B's check held", async () => (gate.checks() === 1 ? true : undefined));
    // Crash (OOM, ...): the supervisor restarts HAProxy on the file, i.e. on A.
    const master = (await showProc(n.masterSocket)).master.pid;
    process.kill(master, "SIGKILL");
    await waitFor("HAProxy restarted", async () => {
      const s = await showProc(n.masterSocket, { timeoutMs: 500 });
      return s.master.pid !== master && s.workers.length > 0 ? true : undefined;
    });
    // The lost runtime change is applied again (and checked again) on top of the file's config.
    await waitFor("B checked again after the restart", async () => (gate.checks() === 2 ? true : undefined));
    gate.release();
    await appliedKey(agent, toB.key);
    expect(await answering(n, "/web/")).toEqual(["B"]);
    expect(readFileSync(n.configPath, "utf8")).toBe((await n.store.get(toB.key)).config);

    // Later diffs start from what runs.
    const toBC = await n.publish(web("web", world.pods.port, [B, C]), 120);
    await n.notify(agent, toBC);
    await appliedKey(agent, toBC.key);
    expect(await answering(n, "/web/")).toEqual(["B", "C"]);
  });

  it("applies a config that failed while HAProxy was down as soon as HAProxy is back, not after its backoff", async () => {
    const n = await node();
    await n.publish(web("web", world.pods.port, [A]), 100);
    // A restart delay long enough to publish and ping in between; the backoff (60 s) far longer than the test.
    const agent = await start(n, {}, { haproxy: { restartDelayMs: 3000, stopGraceMs: 3000, killGraceMs: 2000 } });
    const master = (await showProc(n.masterSocket)).master.pid;
    process.kill(master, "SIGKILL");
    await waitFor("HAProxy down", async () => ((await showProc(n.masterSocket, { timeoutMs: 200 }).catch(() => null)) === null ? true : undefined));
    const next = await n.publish([...web("web", world.pods.port, [A]), ...web("api", world.pods.port, [B])], 110);
    await n.notify(agent, next);
    await waitFor("the failed apply", async () => (agent.status().lastError?.key === next.key ? true : undefined));
    expect(agent.status().backoff).toMatchObject({ key: next.key });
    await appliedKey(agent, next.key);
    await served(n, "/api/", "B");
  });

  it("reloads the file's config when undoing a rejected runtime change fails", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    const first = await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin });
    const socket = statsSocketOf(readFileSync(n.configPath, "utf8"))!;
    const before = await n.reloads();

    gate.hold();
    gate.reject();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    // The runtime API cannot be reached for the undo.
    renameSync(socket, `${socket}.away`);
    gate.release();
    await waitFor("the check error", async () => (agent.status().lastError?.stage === "check" ? true : undefined));
    await waitFor("A served again", async () => ((await answering(n, "/web/")).join() === "A" ? true : undefined));
    expect(await n.reloads()).toBe(before + 1);
    expect(agent.status()).toMatchObject({ applied: { key: first.key }, backoff: { key: toB.key } });

    // The runtime API reachable again (a reload hands the same socket to the new worker): the next endpoint change uses it.
    renameSync(`${socket}.away`, socket);
    const toC = await n.publish(web("web", world.pods.port, [C]), 120);
    await n.notify(agent, toC);
    await appliedKey(agent, toC.key);
    expect(agent.status().applied).toMatchObject({ how: "runtime" });
    expect(await answering(n, "/web/")).toEqual(["C"]);
    expect(await n.reloads()).toBe(before + 1);
  });
});

describe("stopping", () => {
  it("stops promptly while a background check is held, a poll runs and pings keep coming; the check is abandoned", async () => {
    const n = await node();
    const gate = checkGate(n.dir, B);
    await n.publish(web("web", world.pods.port, [A]), 100);
    const agent = await start(n, { haproxyBin: gate.bin, pollInterval: "100ms" });
    cleanups.push(() => gate.release());
    const firstText = readFileSync(n.configPath, "utf8");

    gate.hold();
    const toB = await n.publish(web("web", world.pods.port, [B]), 110);
    await n.notify(agent, toB);
    await served(n, "/web/", "B");
    await waitFor("B's check held", async () => (gate.checks() === 1 ? true : undefined));
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
    const outcome = await Promise.race([agent.stop().then(() => "stopped"), new Promise((r) => setTimeout(() => r("still stopping"), 5000))]);
    pinging = false;
    await pinger;
    expect(outcome).toBe("stopped");
    expect(Date.now() - t0).toBeLessThan(5000);
    // The unchecked change was never written.
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
    const proc = new HaproxyProcess({ configPath: n.configPath, masterSocket: n.masterSocket, stopGraceMs: 2000, killGraceMs: 2000 });
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
