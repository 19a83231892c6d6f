import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { CheckOptions, CheckResult } from "../../../shared/adapters/haproxy/check.js";
import { RuntimeCommandsError } from "../../../shared/adapters/haproxy/runtime.js";
import { createLogger } from "../../../shared/adapters/log.js";
import type { StageTrace } from "../../../shared/adapters/stage-trace.js";
import { traceAgent } from "../../../shared/app/agent-trace.js";
import { type Pin, StoreError, type StoredConfig } from "../../../shared/adapters/store.js";
import { PullLoop, type RuntimePort } from "../../../shared/agent/pull-loop.js";
import { createAgentMetrics } from "../../../shared/agent/metrics.js";
import { EMPTY_STATE } from "../../../shared/agent/node-state.js";
import { renderPatternSection } from "../../../shared/core/haproxy-config/pattern-files.js";
import { commandText, runtimeLines } from "../../../shared/core/haproxy-config/runtime-plan.js";
import { sha256 } from "../../../shared/core/publish/sha256.js";

// The applier with every HAProxy port faked (haproxy -c, the runtime API, process control), so
// an interleaving or a failure that the real binary makes a matter of luck is forced here step
// by step. The real-binary paths are covered by test/integration/agent*.test.ts.

const config = (slots: Array<string | null>) => `global
    master-worker
    stats socket /run/haproxy/admin.sock mode 600 level admin

backend default_web_80 from http_defaults
${slots.map((a, i) => `    server s${i + 1} ${a ?? "127.0.0.1:1 disabled"}`).join("\n")}
`;

const stored = (n: number, text: string): StoredConfig => ({
  key: `configs/${String(n).padStart(20, "0")}-${sha256(text).slice(0, 16)}.cfg`,
  revision: String(n),
  sha256: sha256(text),
  config: text,
});

/** A `haproxy -c` whose verdicts the test hands out, one per call, in call order. */
function gatedCheck() {
  const waiting: Array<(r: CheckResult) => void> = [];
  let calls = 0;
  /** The timeout each check was given (--check-timeout). */
  const timeouts: Array<number | undefined> = [];
  return {
    get calls() {
      return calls;
    },
    timeouts,
    check: (_text: string, opts: CheckOptions) => {
      calls++;
      timeouts.push(opts.timeoutMs);
      return new Promise<CheckResult>((resolve) => waiting.push(resolve));
    },
    async next(result: CheckResult) {
      for (let i = 0; i < 200 && waiting.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
      waiting.shift()!(result);
    },
  };
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function world(runtimeFails?: (command: string) => boolean, trace?: StageTrace) {
  const dir = mkdtempSync(join(tmpdir(), "applier-"));
  dirs.push(dir);
  const configs: StoredConfig[] = [];
  /** pin.json: a pin, none, or the reason it is not a pin. */
  const pin: { value: Pin | null | string } = { value: null };
  const newest: { value: { key: string; sha256: string } | null } = { value: null };
  let listings = 0;
  const commands: string[] = [];
  const gate = gatedCheck();
  const runtime: RuntimePort = {
    // As HAProxy's CLI runs the lines: every command of a line, a refused one taking no effect,
    // and no line after one with a refusal.
    runAll: async (_socket, planned) => {
      let done = 0;
      for (const line of runtimeLines(planned)) {
        const refused = line.map(commandText).filter((text) => {
          if (runtimeFails?.(text)) return true;
          commands.push(text);
          done++;
          return false;
        });
        if (refused.length > 0) throw new RuntimeCommandsError(done, false, `"${refused[0]}" failed`);
      }
    },
    swapPatterns: async (_socket, f) => {
      const text = `swap ${f.path} ${f.entries.join(",")}`;
      if (runtimeFails?.(text)) throw new Error(`HAProxy runtime API: "prepare acl ${f.path}" failed`);
      commands.push(text);
    },
    serversState: async () =>
      "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord\n",
  };
  let reloads = 0;
  const configPath = join(dir, "haproxy.cfg");
  /** lastError as each recorded change left it (what /status and the status report would show). */
  const errors: Array<string | null> = [];
  const applier: PullLoop = new PullLoop({
    store: {
      history: async () => {
        listings++;
        return [...configs].reverse().map((c) => ({
          key: c.key,
          epoch: 0,
          revision: c.revision,
          seq: 0,
          sha256Prefix: c.sha256.slice(0, 16),
          size: c.config.length,
          lastModified: new Date(),
        }));
      },
      get: async (key) => {
        const found = configs.find((c) => c.key === key);
        if (!found) throw new StoreError(`${key} does not exist yet`, { transient: true });
        return found;
      },
      getPin: async () => {
        if (typeof pin.value === "string") throw new StoreError(pin.value, { transient: false });
        return pin.value;
      },
      getNewestHint: async () => newest.value,
    },
    haproxy: {
      running: true,
      start: async () => undefined,
      reload: async () => {
        reloads++;
        return { ok: true };
      },
    },
    configPath,
    stateFile: join(dir, "state.json"),
    haproxyBin: "haproxy",
    checkTimeoutMs: 4321,
    minReloadIntervalMs: 0,
    backoff: { initialMs: 60_000, maxMs: 60_000 },
    metrics: createAgentMetrics(),
    log: createLogger("applier-test", "silent"),
    disk: null,
    saved: EMPTY_STATE,
    check: gate.check,
    runtime,
    decorate: trace && traceAgent(trace),
    onChange: () => errors.push(applier.status().lastError?.message ?? null),
  });
  /** Publishes `config` and lets the applier start HAProxy on it (its haproxy -c passes). */
  const serve = async (config: StoredConfig) => {
    configs.push(config);
    const started = applier.sync();
    await gate.next(OK);
    await started;
    return config;
  };
  return {
    applier,
    configs,
    pin,
    newest,
    commands,
    gate,
    configPath,
    serve,
    errors,
    reloads: () => reloads,
    checks: () => gate.calls,
    listings: () => listings,
  };
}

const OK: CheckResult = { ok: true, warnings: [] };

/** A config whose Service has an allow list, in its pattern file. */
const listed = (slots: Array<string | null>, allow: string[]) =>
  `${config(slots).replace("backend default_web_80 from http_defaults\n", "$&    acl src_allowed src -f patterns/default.web.allow\n")}${renderPatternSection([{ path: "patterns/default.web.allow", entries: allow }])}`;

describe("PullLoop with faked HAProxy ports", () => {
  it("reports each stage of an apply to the stage trace wrapped around its stages, with the config's key", async () => {
    const events: Array<[string, Record<string, unknown> | undefined]> = [];
    const w = world(undefined, (event, fields) => events.push([event, fields]));
    const first = await w.serve(stored(1, config(["10.0.0.1:80", null])));
    const moved = stored(2, config(["10.0.0.2:80", null]));
    w.configs.push(moved);
    await w.applier.sync();
    expect(events.map(([event, fields]) => `${event} ${String(fields?.key ?? "")}`.trim())).toEqual([
      "pull.start",
      `pull.end ${first.key}`,
      `check.done ${first.key}`,
      `start.end ${first.key}`,
      `applied ${first.key}`,
      "pull.start",
      `pull.end ${moved.key}`,
      `runtime.done ${moved.key}`,
      `applied ${moved.key}`,
    ]);
    // The one haproxy -c (the start's) ran with the agent's --check-timeout.
    expect(w.gate.timeouts).toEqual([4321]);
  });

  it("a poll that newest.json says found nothing new lists nothing, but every 10th pull lists all the same", async () => {
    const w = world();
    const first = await w.serve(stored(1, config(["10.0.0.1:80", null])));
    w.newest.value = { key: first.key, sha256: first.sha256 };
    const before = w.listings();
    for (let i = 0; i < 9; i++) await w.applier.sync();
    expect(w.listings()).toBe(before);
    await w.applier.sync();
    expect(w.listings()).toBe(before + 1);
    // A hint that names a newer key is listed and judged like any other, then pulled.
    const moved = stored(2, config(["10.0.0.2:80", null]));
    w.configs.push(moved);
    w.newest.value = { key: moved.key, sha256: moved.sha256 };
    await w.applier.sync();
    expect(w.listings()).toBe(before + 2);
    expect(w.applier.status().applied?.key).toBe(moved.key);
    // A stale hint (it names the older key) delays a node no ping reaches by ten polls at most.
    const third = stored(3, config(["10.0.0.3:80", null]));
    w.configs.push(third);
    w.newest.value = { key: moved.key, sha256: moved.sha256 };
    for (let i = 0; i < 10 && w.applier.status().applied?.key !== third.key; i++) await w.applier.sync();
    expect(w.applier.status().applied?.key).toBe(third.key);
  });

  it("an in-place move goes live make before break and is written at once, with no haproxy -c", async () => {
    const w = world();
    const first = await w.serve(stored(1, config(["10.0.0.1:80", null])));
    expect(w.applier.status().applied?.key).toBe(first.key);

    const moved = stored(2, config(["10.0.0.2:80", null]));
    w.configs.push(moved);
    await w.applier.sync();
    // The new pod rides the spare slot s2 until its own slot has the new address.
    expect(w.commands.map((c) => c.replace("set server default_web_80/", ""))).toEqual([
      "s2 addr 10.0.0.2 port 80",
      "s2 state ready",
      "s1 state drain",
      "s1 state maint",
      "s1 addr 10.0.0.2 port 80",
      "s1 state ready",
      "s2 state drain",
      "s2 state maint",
      "s2 addr 127.0.0.1 port 1",
    ]);
    expect(readFileSync(w.configPath, "utf8")).toBe(moved.config);
    expect(w.applier.status()).toMatchObject({ applied: { key: moved.key, how: "runtime" }, lastError: null });
    expect(w.checks()).toBe(1);
    expect(w.reloads()).toBe(0);
  });

  it("a runtime change HAProxy refuses half-way is checked and reloaded: the reload sets every slot", async () => {
    // HAProxy refuses the new address of s1, after s2 carried it and s1 was taken down: s1 is
    // not made ready on its old address, and s2 keeps carrying the new one.
    const w = world((c) => c === "set server default_web_80/s1 addr 10.0.0.2 port 80");
    await w.serve(stored(1, config(["10.0.0.1:80", null])));
    const moved = stored(2, config(["10.0.0.2:80", null]));
    w.configs.push(moved);
    const applying = w.applier.sync();
    await w.gate.next(OK);
    await applying;
    expect(w.commands.map((c) => c.replace("set server default_web_80/", ""))).toEqual([
      "s2 addr 10.0.0.2 port 80",
      "s2 state ready",
      "s1 state drain",
      "s1 state maint",
    ]);
    expect(w.reloads()).toBe(1);
    expect(readFileSync(w.configPath, "utf8")).toBe(moved.config);
    expect(w.applier.status().applied).toMatchObject({ key: moved.key, how: "reload" });
  });

  it("a rejected reload after a half-done runtime change reloads the file's config, and the slots are known again", async () => {
    const w = world((c) => c === "set server default_web_80/s1 addr 10.0.0.2 port 80");
    const first = await w.serve(stored(1, config(["10.0.0.1:80", null])));
    const moved = stored(2, config(["10.0.0.2:80", null]));
    w.configs.push(moved);
    const applying = w.applier.sync();
    await w.gate.next({ ok: false, errors: ["[ALERT] bad"], output: "", alerted: true });
    await applying;
    // The file's config, reloaded: every slot as the last good config says.
    expect(w.reloads()).toBe(1);
    expect(readFileSync(w.configPath, "utf8")).toBe(first.config);
    expect(w.applier.status()).toMatchObject({
      applied: { key: first.key },
      lastError: { stage: "check", key: moved.key },
    });
    // The next endpoint change goes through the runtime API again.
    const next = stored(3, config(["10.0.0.1:80", "10.0.0.3:80"]));
    w.configs.push(next);
    await w.applier.sync();
    expect(w.commands.slice(-2)).toEqual([
      "set server default_web_80/s2 addr 10.0.0.3 port 80",
      "set server default_web_80/s2 state ready",
    ]);
    expect(w.applier.status().applied).toMatchObject({ key: next.key, how: "runtime" });
  });

  it("a runtime change whose file cannot be written nor undone: the file's config is reloaded and the newest pulled again", async () => {
    // The undo would move s1 back; HAProxy refuses that, so only a reload of the file restores the slots.
    const w = world((c) => c === "set server default_web_80/s1 addr 10.0.0.1 port 80");
    const first = await w.serve(stored(1, config(["10.0.0.1:80", null])));
    // haproxy.cfg cannot be replaced: a directory holds its name.
    rmSync(w.configPath);
    mkdirSync(join(w.configPath, "in-the-way"), { recursive: true });
    const moved = stored(2, config(["10.0.0.2:80", null]));
    w.configs.push(moved);
    const listed = w.listings();
    await w.applier.sync();
    expect(w.commands).toContain("set server default_web_80/s1 addr 10.0.0.2 port 80");
    expect(w.reloads()).toBe(1);
    expect(w.applier.status()).toMatchObject({
      applied: { key: first.key },
      lastError: { stage: "apply", key: moved.key, message: expect.stringMatching(/^cannot write /) },
    });
    // The runtime change that was dropped is pulled again: a second listing in the same sync.
    expect(w.listings() - listed).toBe(2);
  });

  it("an allow list changed (and a pod moved): the list swapped through the runtime API, files written, no check, no reload", async () => {
    const w = world();
    await w.serve(stored(1, listed(["10.0.0.1:80", null, null, null], ["10.0.0.0/8"])));
    const listFile = join(w.configPath, "..", "patterns/default.web.allow");
    expect(readFileSync(listFile, "utf8")).toBe("10.0.0.0/8\n");
    const changed = stored(2, listed(["10.0.0.1:80", "10.0.0.2:80", null, null], ["192.168.0.0/16", "fd00::/8"]));
    w.configs.push(changed);
    await w.applier.sync();
    expect(w.commands).toEqual([
      "set server default_web_80/s2 addr 10.0.0.2 port 80",
      "set server default_web_80/s2 state ready",
      "swap patterns/default.web.allow 192.168.0.0/16,fd00::/8",
    ]);
    expect(readFileSync(listFile, "utf8")).toBe("192.168.0.0/16\nfd00::/8\n");
    expect(readFileSync(w.configPath, "utf8")).toBe(changed.config);
    expect(w.applier.status()).toMatchObject({ applied: { key: changed.key, how: "runtime" }, lastError: null });
    expect(w.checks()).toBe(1);
    expect(w.reloads()).toBe(0);
  });

  it("a list swap HAProxy refuses is checked and reloaded: the reload reads the new list from its file", async () => {
    const w = world((c) => c.startsWith("swap "));
    await w.serve(stored(1, listed(["10.0.0.1:80", null], ["10.0.0.0/8"])));
    const changed = stored(2, listed(["10.0.0.1:80", null], ["192.168.0.0/16"]));
    w.configs.push(changed);
    const applying = w.applier.sync();
    await w.gate.next(OK);
    await applying;
    expect(w.reloads()).toBe(1);
    expect(readFileSync(join(w.configPath, "..", "patterns/default.web.allow"), "utf8")).toBe("192.168.0.0/16\n");
    expect(w.applier.status().applied).toMatchObject({ key: changed.key, how: "reload" });
  });

  it("a list removed with its acl line is a reload, and its file is removed", async () => {
    const w = world();
    await w.serve(stored(1, listed(["10.0.0.1:80", null], ["10.0.0.0/8"])));
    const plain = stored(2, config(["10.0.0.1:80", null]));
    w.configs.push(plain);
    const applying = w.applier.sync();
    await w.gate.next(OK);
    await applying;
    expect(w.reloads()).toBe(1);
    expect(w.commands).toEqual([]);
    expect(readdirSync(join(w.configPath, "..", "patterns"))).toEqual([]);
  });

  it("an in-place move with no spare slot is reloaded after its check, with no runtime command", async () => {
    const w = world();
    await w.serve(stored(1, config(["10.0.0.1:80", "10.0.0.2:80"])));
    const moved = stored(2, config(["10.0.0.3:80", "10.0.0.2:80"]));
    w.configs.push(moved);
    const applying = w.applier.sync();
    await w.gate.next(OK);
    await applying;
    expect(w.commands).toEqual([]);
    expect(w.reloads()).toBe(1);
    expect(readFileSync(w.configPath, "utf8")).toBe(moved.config);
    expect(w.applier.status().applied).toMatchObject({ key: moved.key, how: "reload" });
  });

  describe("a pin.json that is not a pin never moves the node", () => {
    const pinOf = (c: StoredConfig): Pin => ({ key: c.key, sha256: c.sha256, pinnedAt: "2026-01-01T00:00:00Z" });

    it("following the newest, it holds at the running config and says so; removed, the newest is followed again", async () => {
      const w = world();
      const v1 = await w.serve(stored(1, config(["10.0.0.1:80", null])));
      w.pin.value = "pin.json is not JSON";
      w.configs.push(stored(2, config(["10.0.0.2:80", null])));
      await w.applier.sync();
      await w.applier.sync();
      expect(w.applier.status()).toMatchObject({
        applied: { key: v1.key },
        pinned: null,
        lastError: {
          stage: "pull",
          key: null,
          message: `pin.json is not a pin (pin.json is not JSON): holding at the config it runs, ${v1.key} until pin.json is a pin again or is removed`,
        },
      });
      expect(w.commands).toEqual([]);

      w.pin.value = null;
      await w.applier.sync();
      expect(w.applier.status()).toMatchObject({ applied: { key: w.configs[1]!.key }, lastError: null });
    });

    it("pinned and holding, it never shows the error cleared between two pulls", async () => {
      const w = world();
      const v1 = await w.serve(stored(1, config(["10.0.0.1:80", null])));
      w.pin.value = pinOf(v1);
      await w.applier.sync();
      w.pin.value = "pin.json is not JSON";
      w.configs.push(stored(2, config(["10.0.0.2:80", null])));
      w.errors.length = 0;
      for (let i = 0; i < 3; i++) await w.applier.sync();
      expect(w.errors.length).toBeGreaterThan(0);
      expect(w.errors.filter((e) => e === null || !e.includes(`holding at the last pin, ${v1.key}`))).toEqual([]);
    });

    it("pinned to a config it could not fetch yet, it goes on pulling that pin", async () => {
      const w = world();
      await w.serve(stored(2, config(["10.0.0.2:80", null])));
      const v1 = stored(1, config(["10.0.0.1:80", "10.0.0.3:80"]));
      w.pin.value = pinOf(v1);
      await w.applier.sync();
      expect(w.applier.status()).toMatchObject({ pinned: { key: v1.key }, lastError: { stage: "pull", key: v1.key } });

      w.pin.value = "pin.json is not a pin: key: Required";
      w.configs.push(v1, stored(3, config(["10.0.0.4:80", null])));
      // .2 leaves, .1 and .3 come: the up readies s2 first, then s1 is re-addressed (runtime-plan.ts).
      await w.applier.sync();
      expect(w.applier.status()).toMatchObject({
        applied: { key: v1.key, how: "runtime" },
        pinned: { key: v1.key },
        lastError: {
          stage: "pull",
          key: v1.key,
          message: expect.stringContaining(`holding at the last pin, ${v1.key}`),
        },
      });
    });
  });
});
