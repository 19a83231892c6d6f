import { describe, expect, it } from "vitest";
import { StoreError, type HistoryEntry, type ObjectStore, type StoredConfig } from "../../../shared/adapters/store.js";
import { createAgentMetrics } from "../../../shared/agent/metrics.js";
import { watchStore } from "../../../shared/agent/store-watch.js";

/** A store whose answers the test decides, on a clock the test moves. */
function fakeStore() {
  const entry = (key: string): HistoryEntry => ({
    key,
    epoch: 0,
    revision: "1",
    seq: 0,
    sha256Prefix: "0".repeat(16),
    size: 1,
    lastModified: new Date(0),
  });
  const s = {
    newest: "configs/a",
    getFails: false,
    hang: false,
    /** What pin.json holds: a pin, nothing, or a read that fails with this error. */
    pin: null as { key: string } | null | Error,
    store: {
      endpoint: "http://store",
      history: async () => (s.hang ? new Promise<never>(() => undefined) : [entry(s.newest)]),
      get: async (key: string): Promise<StoredConfig> => {
        if (s.getFails) throw new StoreError(`get ${key} failed`, { transient: true });
        return { key, config: "x", sha256: "0".repeat(64), revision: "1" };
      },
      getPin: async () => {
        if (s.pin instanceof Error) throw s.pin;
        return s.pin && { ...s.pin, sha256: "0".repeat(64), pinnedAt: "2026-01-01T00:00:00Z" };
      },
      putStatus: async () => undefined,
    } as unknown as ObjectStore,
  };
  return s;
}

function setup() {
  const fake = fakeStore();
  let clock = 1_000_000;
  const metrics = createAgentMetrics();
  const watched = watchStore(fake.store, { metrics, staleAfterMs: 3000, now: () => clock });
  return {
    fake,
    watched,
    metrics,
    tick: (ms: number) => (clock += ms),
    at: (ms: number) => new Date(ms).toISOString(),
    now: () => clock,
  };
}

describe("watchStore", () => {
  it("counts a pull complete when its listing and the GET of the config it named succeed", async () => {
    const { watched, tick, now, at } = setup();
    expect(watched.health()).toMatchObject({ lastSuccessAt: null, stale: false, consecutiveFailures: 0 });
    tick(4000);
    expect(watched.health().stale).toBe(true);
    await watched.store.history({ limit: 1 });
    tick(10);
    await watched.store.get("configs/a");
    expect(watched.health()).toMatchObject({
      lastSuccessAt: at(now()),
      stale: false,
      consecutiveFailures: 0,
      lastFailure: null,
    });
  });

  it("does not count a listing whose config cannot be fetched, pull after pull", async () => {
    const { fake, watched, tick, now, at } = setup();
    await watched.store.history({ limit: 1 });
    const good = now();
    fake.getFails = true;
    for (let i = 1; i <= 3; i++) {
      tick(1500);
      await watched.store.history({ limit: 1 });
      await expect(watched.store.get("configs/a")).rejects.toThrow("failed");
      expect(watched.health()).toMatchObject({
        lastSuccessAt: at(good),
        consecutiveFailures: i,
        lastFailure: { message: "get configs/a failed" },
      });
    }
    expect(watched.health().stale).toBe(true);
  });

  it("does not hold a ping's key that cannot be fetched against the pulls", async () => {
    const { fake, watched, now, at } = setup();
    await watched.store.history({ limit: 1 });
    fake.getFails = true;
    await expect(watched.store.get("configs/b")).rejects.toThrow("failed");
    expect(watched.health()).toMatchObject({ lastSuccessAt: at(now()), consecutiveFailures: 0 });
  });

  it("counts a pin.json that cannot be read, or is not a pin, as a failed pull, pull after pull", async () => {
    const { fake, watched, tick, now, at } = setup();
    await watched.store.getPin();
    await watched.store.history({ limit: 1 });
    const good = now();
    fake.pin = new StoreError("S3 get pin.json failed", { transient: true });
    for (let i = 1; i <= 3; i++) {
      tick(1500);
      await expect(watched.store.getPin()).rejects.toThrow("failed");
      expect(watched.health()).toMatchObject({
        lastSuccessAt: at(good),
        consecutiveFailures: i,
        lastFailure: { at: at(now()), message: "S3 get pin.json failed" },
      });
    }
    fake.pin = new StoreError("pin.json is not a pin", { transient: false });
    await expect(watched.store.getPin()).rejects.toThrow("not a pin");
    expect(watched.health()).toMatchObject({
      consecutiveFailures: 4,
      lastFailure: { message: "pin.json is not a pin" },
    });
    expect(watched.health().stale).toBe(true);

    fake.pin = null;
    await watched.store.getPin();
    await watched.store.history({ limit: 1 });
    expect(watched.health()).toMatchObject({ lastSuccessAt: at(now()), consecutiveFailures: 0, stale: false });
  });

  it("while pinned, the pin's read completes a pull, and the GET of the pinned config confirms or takes it back", async () => {
    const { fake, watched, tick, now, at } = setup();
    fake.pin = { key: "configs/p" };
    tick(4000);
    await watched.store.getPin();
    expect(watched.health()).toMatchObject({ lastSuccessAt: at(now()), consecutiveFailures: 0, stale: false });
    const good = now();

    tick(1000);
    fake.getFails = true;
    await watched.store.getPin();
    await expect(watched.store.get("configs/p")).rejects.toThrow("failed");
    expect(watched.health()).toMatchObject({ lastSuccessAt: at(good), consecutiveFailures: 1 });

    tick(1000);
    fake.getFails = false;
    await watched.store.getPin();
    tick(10);
    await watched.store.get("configs/p");
    expect(watched.health()).toMatchObject({ lastSuccessAt: at(now()), consecutiveFailures: 0 });
  });

  it("abandons the requests in flight at once on stop, and counts them as such", async () => {
    const { fake, watched, metrics } = setup();
    fake.hang = true;
    const pending = watched.store.history({ limit: 1 });
    watched.stop();
    await expect(pending).rejects.toMatchObject({
      name: "StoreError",
      message: "S3 list at http://store abandoned: the agent is stopping",
    });
    let sent = false;
    fake.store.putStatus = async () => {
      sent = true;
    };
    await expect(watched.store.putStatus("n", {})).rejects.toThrow("abandoned");
    expect(sent).toBe(false);
    const values = (await metrics.storeFailures.get()).values;
    expect(values.map((v) => [v.labels.operation, v.labels.reason, v.value])).toEqual([
      ["list", "stopping", 1],
      ["put", "stopping", 1],
    ]);
    // Stopping is no failure of the store.
    expect(watched.health().consecutiveFailures).toBe(0);
  });
});
