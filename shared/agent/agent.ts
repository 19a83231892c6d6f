/*
 * `servicelb agent`: one per HAProxy node. Wires the pieces: HAProxy under supervision, the
 * applier, the HTTP API, the poll loop and the status report. On start it applies the newest
 * published config at once, or serves the last good one on disk when the store is unreachable,
 * so a restarted node serves before its first ping.
 */

import type { S3ClientConfig } from "@aws-sdk/client-s3";
import { mkdir } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname } from "node:path";
import { checkConfig } from "../adapters/haproxy/check.js";
import { runRuntimeCommands, showServersState, swapPatternFile } from "../adapters/haproxy/runtime.js";
import { type ProcStatus, type ReloadResult, showProc } from "../adapters/haproxy/master.js";
import { HaproxyProcess, type HaproxyProcessOptions } from "../adapters/haproxy/process.js";
import { openFileLimit } from "../adapters/haproxy/proc-info.js";
import { showStat, type StatRow } from "../adapters/haproxy/runtime.js";
import { createLogger, type Logger } from "../adapters/log.js";
import type { ObjectStore } from "../adapters/store.js";
import { openStore } from "../adapters/open-store.js";
import { packageVersion } from "../adapters/package-version.js";
import type { Backoff } from "../core/backoff.js";
import { withTimeout } from "../core/deadline.js";
import { PullLoop, type HaproxyControl, type RuntimePort } from "./pull-loop.js";
import type { StageDecorators } from "./pull-stages.js";
import { readIfExists } from "./files.js";
import { haproxyLineLevel, haproxyLogText } from "./haproxy-log-lines.js";
import { startHttpApi } from "./http-api.js";
import { runningExporter } from "./haproxy-metrics.js";
import { certificateProbe } from "./certificate-expiry.js";
import { CertificateWatch } from "./certificate-watch.js";
import { GatewayCertificates } from "./gateway-certificates.js";
import { createAgentMetrics, type AgentMetrics } from "./metrics.js";
import { nodeHealth } from "./node-health.js";
import { agentStore, haproxyEnvironment, stateFilePath, type AgentOptions } from "./options.js";
import { findOrphanMaster, retireOrphanMaster } from "./orphan.js";
import { loadState } from "./node-state.js";
import { type NodeStatus, startStatusReporter, type StatusReporter } from "./status-report.js";
import { watchStore } from "./store-watch.js";
import { tokenSource } from "./token.js";
import { until } from "./until.js";
import type { ConfigChecker } from "./admission.js";
import { DIGEST_KINDS } from "../core/publish/config-digest.js";
import { statsSocketOf } from "../core/haproxy-config/globals.js";
import { TrafficSampler } from "./traffic-sampler.js";
import { haproxyReserve, haproxyThreads, type NodeFiles } from "../core/model/descriptors.js";
import { errorMessage } from "../core/error-message.js";

/** The supervised HAProxy master, as the agent uses it (adapters/haproxy/process.ts). */
export interface SupervisedHaproxy extends Pick<HaproxyProcess, "running" | "pid" | "supervision" | "start" | "stop"> {
  reload(): Promise<Pick<ReloadResult, "ok" | "reason">>;
}

/**
 * Where the agent meets HAProxy: the master it supervises, `haproxy -c`, the runtime API and the
 * master CLI's `show proc`. Real by default; bench/fleet fakes them to run a thousand agents in one
 * process, with the pull, verification, decision, files and records still the agent's own.
 */
export interface HaproxyPorts {
  supervise(options: HaproxyProcessOptions): SupervisedHaproxy;
  check: ConfigChecker;
  runtime: RuntimePort;
  showProc(masterSocket: string, options: { timeoutMs: number }): Promise<ProcStatus>;
  /** `show stat` on the runtime API: the counters a canary gate judges (traffic-sampler.ts). */
  stat?(socket: string): Promise<StatRow[]>;
}

/** The real implementations: the one place they are wired. */
const REAL_HAPROXY: HaproxyPorts = {
  supervise: (options) => new HaproxyProcess(options),
  check: checkConfig,
  runtime: { runAll: runRuntimeCommands, swapPatterns: swapPatternFile, serversState: showServersState },
  showProc,
  stat: (socket) => showStat(socket),
};

export interface AgentDeps {
  log?: Logger;
  /** Default: the store named by the options. */
  store?: ObjectStore;
  /** For the default store; default: the standard AWS credential chain. */
  storeCredentials?: S3ClientConfig["credentials"];
  /** Supervision timings (tests change them). */
  haproxy?: Partial<
    Pick<
      HaproxyProcessOptions,
      | "restartDelayMs"
      | "restartStableMs"
      | "restartInitialDelayMs"
      | "restartMaxDelayMs"
      | "stopGraceMs"
      | "killGraceMs"
    >
  >;
  /** Retry of a failed config. Default 10 s doubling to 5 min. */
  backoff?: Backoff;
  /** HAProxy's own log lines (its stdout, `--syslog`). Default: the agent's stdout. */
  haproxyLog?: (line: string) => void;
  /** Wrapped around the pull loop's stages (pull-stages.ts): the benches' stage trace, app/agent-trace.ts. */
  decorate?: StageDecorators;
  /** Default: the real HAProxy. */
  haproxyPorts?: HaproxyPorts;
}

export interface Agent {
  /** Base URL of the HTTP API. */
  url: string;
  metrics: AgentMetrics;
  status(): NodeStatus;
  /** Stops the loops, lets a running apply finish, stops HAProxy gracefully. */
  stop(): Promise<void>;
}

/** Connect and idle timeout of store requests: a store that stops answering is given up on fast. */
const STORE_IDLE_TIMEOUT_MS = 3000;
/** The last status report on the way out may not hold up the stop: the store may be the reason for it. */
const FINAL_STATUS_TIMEOUT_MS = 2000;
/** Most time between two samples of HAProxy's counters during a rollout. */
const TRAFFIC_SAMPLE_MS = 2000;

/** HAProxy's diagnostics (stderr) into the agent's log, routine transitions at info. */
function haproxyDiagnostic(log: Logger, line: string): void {
  const level = haproxyLineLevel(line);
  log[level]({ haproxy: haproxyLogText(line, level) }, "haproxy");
}

export async function startAgent(options: AgentOptions, deps: AgentDeps = {}): Promise<Agent> {
  const log = deps.log ?? createLogger("agent");
  const ownStore = deps.store === undefined;
  const store =
    deps.store ??
    openStore(agentStore(options), {
      credentials: deps.storeCredentials,
      timeoutMs: STORE_IDLE_TIMEOUT_MS,
      deadlineMs: options.storeTimeout,
      maxObjectBytes: options.maxConfigSize,
    });
  const haproxyLog = deps.haproxyLog ?? ((line: string) => process.stdout.write(`${line}\n`));
  const version = `servicelb/${packageVersion()}`;
  for (const dir of [options.stateDir, dirname(options.configPath), dirname(options.masterSocket)])
    await mkdir(dir, { recursive: true });

  const metrics = createAgentMetrics();
  const watched = watchStore(store, { metrics, staleAfterMs: options.pollInterval * options.stalePullPeriods });
  metrics.probePullStale(() => watched.health().stale);
  const stateFile = stateFilePath(options);
  const [saved, disk, orphan] = await Promise.all([
    loadState(stateFile, log),
    readIfExists(options.configPath),
    findOrphanMaster(options.masterSocket),
  ]);

  const ports = deps.haproxyPorts ?? REAL_HAPROXY;
  const haproxyEnv = haproxyEnvironment(options, process.env);
  const proc = ports.supervise({
    env: haproxyEnv,
    configPath: options.configPath,
    masterSocket: options.masterSocket,
    haproxyBin: options.haproxyBin,
    stopGraceMs: options.stopGrace,
    startTimeoutMs: options.startTimeout,
    reloadTimeoutMs: options.startTimeout,
    onOutput: (line, stream) => (stream === "stdout" ? haproxyLog(line) : haproxyDiagnostic(log, line)),
    onRestart: (info) => {
      metrics.haproxyRestarts.inc({ cause: info.cause });
      metrics.haproxyQuickCrashes.set(info.quickCrashes);
      metrics.haproxyRestartDelay.set(info.delayMs / 1000);
      log.error(
        { cause: info.cause, servedMs: info.servedMs, quickCrashes: info.quickCrashes, delayMs: info.delayMs },
        info.reason,
      );
    },
    onRestarted: (configText, recovery) => {
      metrics.haproxyRecoverySeconds.observe({ cause: recovery.cause }, recovery.downMs / 1000);
      log.warn({ cause: recovery.cause, downMs: recovery.downMs }, "HAProxy serves again");
      applier.haproxyRestarted(configText);
    },
    ...deps.haproxy,
  });
  // While a reload we ordered runs, the master re-executes and refuses its CLI; the old worker serves meanwhile.
  let reloading = false;
  const haproxy: HaproxyControl = {
    get running() {
      return proc.running;
    },
    async start() {
      await proc.start();
      if (orphan !== null) retireOrphanMaster(orphan, proc.pid, log);
    },
    async reload() {
      reloading = true;
      try {
        return await proc.reload();
      } finally {
        reloading = false;
      }
    },
  };

  /**
   * HAProxy's own limit while it runs (a wrapper given as --haproxy-bin may have set it), else
   * the agent's, which HAProxy inherits.
   */
  const openFiles = (): NodeFiles | null => {
    const limit = openFileLimit(proc.pid ?? "self");
    return limit === null ? null : { limit, cpus: availableParallelism() };
  };

  let reporter: StatusReporter | undefined;
  const applier = new PullLoop({
    store: watched.store,
    haproxy,
    configPath: options.configPath,
    stateFile,
    haproxyBin: options.haproxyBin,
    haproxyEnv,
    checkTimeoutMs: options.checkTimeout,
    openFiles,
    check: ports.check,
    runtime: ports.runtime,
    minReloadIntervalMs: options.minReloadInterval,
    backoff: deps.backoff ?? { initialMs: 10_000, maxMs: 300_000 },
    metrics,
    log,
    disk,
    saved,
    onChange: () => reporter?.changed(),
    decorate: deps.decorate,
    ...(options.canary ? { canaryNode: options.nodeName } : {}),
  });
  const traffic = new TrafficSampler();
  metrics.probeRunning(() => applier.running);
  // Not while HAProxy is down (a restart backing off): its socket would fail every check.
  const certificates = new CertificateWatch({
    running: () => (proc.running ? applier.running : null),
    env: haproxyEnv,
    metrics,
    log,
  });
  const gatewayCertificates = options.gatewayCertDir ? new GatewayCertificates(options.gatewayCertDir, log) : null;
  metrics.probeCertificates(
    certificateProbe(
      () => applier.running,
      undefined,
      () => certificates.status().swapped,
      haproxyEnv,
    ),
  );
  metrics.probePinnedAt(() => {
    const pin = applier.status().pinned;
    return pin && new Date(pin.pinnedAt);
  });

  const status = (): NodeStatus => {
    const files = openFiles();
    return {
      node: options.nodeName,
      ...applier.status(),
      haproxy: { running: proc.running, ...proc.supervision() },
      pull: watched.health(),
      reportIntervalSeconds: options.statusInterval / 1000,
      reportedAt: new Date().toISOString(),
      agent: version,
      digests: [...DIGEST_KINDS],
      formats: ["chunks1"],
      openFiles: files && { limit: files.limit, reserved: haproxyReserve(haproxyThreads(files.cpus)) },
      certificates: certificates.status(),
      gatewayCertificates: gatewayCertificates?.held() ?? null,
      ...(options.canary ? { traffic: traffic.report() } : {}),
    };
  };

  const api = await startHttpApi({
    host: options.listen.host,
    port: options.listen.port,
    expectedToken: tokenSource({ file: options.notifyTokenFile, token: options.notifyToken }),
    onNotify: (body) => applier.notify(body.key, body.sha256),
    health: nodeHealth({
      applier,
      haproxy: proc,
      reloading: () => reloading,
      pull: () => watched.health(),
      showProc: ports.showProc,
      masterSocket: options.masterSocket,
    }),
    status,
    metrics,
    exporter: runningExporter(() => applier.running, haproxyEnv),
    log,
  });

  // The first report already lists them.
  await gatewayCertificates?.check();
  await applier.sync();
  reporter = startStatusReporter({
    store: watched.store,
    node: options.nodeName,
    intervalMs: options.statusInterval,
    report: status,
    log,
    onFailure: () => metrics.loopFailures.inc({ loop: "status" }),
  });
  const poll = until(() => applier.sync(), {
    name: "poll",
    periodMs: options.pollInterval,
    jitter: 0.2,
    log,
    onFailure: () => metrics.loopFailures.inc({ loop: "poll" }),
  });
  const certificateLoop = until(
    async () => {
      // The function learns from the report which certificates it may bind: tell it soon.
      if (await gatewayCertificates?.check()) reporter?.changed();
      await certificates.check();
    },
    {
      name: "certificates",
      periodMs: options.certificateInterval,
      immediate: true,
      log,
      onFailure: () => metrics.loopFailures.inc({ loop: "certificates" }),
    },
  );
  // The gates judge what the counters say at the last report: sampled a few times per report.
  const sampling = options.canary
    ? until(sampleTraffic, {
        name: "traffic sample",
        periodMs: Math.min(options.statusInterval / 2, TRAFFIC_SAMPLE_MS),
        jitter: 0,
        immediate: true,
        log,
        onFailure: () => metrics.loopFailures.inc({ loop: "traffic" }),
      })
    : undefined;
  log.info(
    { url: api.url, node: options.nodeName, store: options.store, applied: applier.appliedKey, canary: options.canary },
    "agent started",
  );

  async function sampleTraffic(): Promise<void> {
    const running = applier.running;
    const socket = running && statsSocketOf(running.text, haproxyEnv);
    const window = applier.rolloutWindow;
    if (!socket || !ports.stat || window === null) return traffic.record([], null, null);
    traffic.record(await ports.stat(socket), window, running.key);
  }

  async function finalStatus(): Promise<void> {
    try {
      await withTimeout(
        store.putStatus(options.nodeName, status()),
        FINAL_STATUS_TIMEOUT_MS,
        () => `no answer within ${FINAL_STATUS_TIMEOUT_MS} ms`,
      );
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "cannot write the final status");
    }
  }

  let stopping: Promise<void> | undefined;
  return {
    url: api.url,
    metrics,
    status,
    stop() {
      stopping ??= (async () => {
        // Nothing waits for the store from here on: requests in flight are abandoned.
        watched.stop();
        // The applier first: it refuses pings and polls and drops a pending check, so that the
        // poll's run in flight (which waits on the applier's loop) ends at once too.
        await applier.stop();
        await poll.stop();
        await certificateLoop.stop();
        await sampling?.stop();
        await reporter?.stop();
        await proc.stop();
        // The last word, so that `servicelb status` shows this node down rather than a report going stale.
        await finalStatus();
        await api.close();
        if (ownStore) store.close();
        log.info("agent stopped");
      })();
      return stopping;
    },
  };
}
