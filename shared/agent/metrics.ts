import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { parseConfig } from "../core/haproxy-config/parse.js";
import type { CertificateExpiry } from "../adapters/haproxy/certificates.js";
import { NO_SERIES, type ServiceSeries, serviceSeriesOf } from "./service-series.js";

/** The config HAProxy runs, as the info series read it at each scrape. */
export interface RunningConfig {
  text: string;
  /** null: a config on disk the agent cannot name. */
  key: string | null;
  sha256: string;
}

/** The agent's Prometheus metrics, on a registry of its own (tests run several agents in one process). */
export interface AgentMetrics {
  registry: Registry;
  appliedRevision: Gauge;
  appliedTimestamp: Gauge;
  pulls: Counter<"result">;
  notifiedPulls: Counter<"result">;
  reloads: Counter;
  reloadFailures: Counter;
  runtimeUpdates: Counter;
  rolloutWave: Gauge;
  rolloutCandidate: Gauge;
  runtimeServerChanges: Counter;
  runtimePatternSwaps: Counter;
  applyFailures: Counter<"stage">;
  skippedConfigs: Counter;
  pullSeconds: Histogram;
  applySeconds: Histogram<"how">;
  notifications: Counter<"result">;
  loopFailures: Counter<"loop">;
  haproxyRestarts: Counter<"cause">;
  haproxyQuickCrashes: Gauge;
  haproxyRestartDelay: Gauge;
  haproxyRecoverySeconds: Histogram<"cause">;
  storeFailures: Counter<"operation" | "reason">;
  lastSuccessfulPull: Gauge;
  pullStale: Gauge;
  backendInfo: Gauge<"proxy" | "service_namespace" | "service_name" | "service_port">;
  serverInfo: Gauge<"proxy" | "server" | "address">;
  configInfo: Gauge<"key" | "sha256">;
  pinnedTimestamp: Gauge;
  certificateExpiry: Gauge<"certificate">;
  certificateUpdates: Counter<"result">;
  certificateRefused: Gauge<"certificate">;
  /** What pullStale reports at each scrape (staleness changes with time alone, not on an event). */
  probePullStale(probe: () => boolean): void;
  /** The config HAProxy runs (null: none yet), read at each scrape by the info series. */
  probeRunning(probe: () => RunningConfig | null): void;
  /** When the pin the agent honours was set (null: none), read at each scrape. */
  probePinnedAt(probe: () => Date | null): void;
  /** The certificates HAProxy serves and when each expires, read at each scrape. */
  probeCertificates(probe: () => Promise<CertificateExpiry[]>): void;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/**
 * Series of labelled counters that alerts take increase() of: present at 0 from the start, or
 * the first failure would be a series appearing at 1, which increase() never sees.
 */
function zeroed(metrics: AgentMetrics): AgentMetrics {
  for (const stage of ["pull", "verify", "check", "apply"]) metrics.applyFailures.inc({ stage }, 0);
  for (const result of ["new", "none", "failed"]) metrics.pulls.inc({ result }, 0);
  return metrics;
}

export function createAgentMetrics(): AgentMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  let stale = () => false;
  let running: () => RunningConfig | null = () => null;
  let pinnedAt: () => Date | null = () => null;
  let certificates: () => Promise<CertificateExpiry[]> = async () => [];
  // Parsed once per config text: scrapes outnumber configs.
  let seen: { text: string; series: ServiceSeries } = { text: "", series: NO_SERIES };
  const series = (): ServiceSeries => {
    const r = running();
    if (r === null) return NO_SERIES;
    if (seen.text !== r.text) seen = { text: r.text, series: serviceSeriesOf(parseConfig(r.text)) };
    return seen.series;
  };
  return zeroed({
    registry,
    rolloutWave: new Gauge({
      name: "servicelb_agent_rollout_wave",
      help: "The canary rollout's wave that admits this node (1: the canary), 0 outside a rollout or without --canary",
      registers,
    }),
    rolloutCandidate: new Gauge({
      name: "servicelb_agent_rollout_candidate",
      help: "1 while rollout.json has this node run the rollout's candidate config, 0 otherwise",
      registers,
    }),
    appliedRevision: new Gauge({
      name: "servicelb_agent_applied_revision",
      help: "Snapshot revision of the config HAProxy runs (0: unknown)",
      registers,
    }),
    appliedTimestamp: new Gauge({
      name: "servicelb_agent_applied_timestamp_seconds",
      help: "When the running config was applied",
      registers,
    }),
    pulls: new Counter({
      name: "servicelb_agent_pulls_total",
      help: "Looks at the store for a newer config, by result (new, none, failed)",
      labelNames: ["result"],
      registers,
    }),
    notifiedPulls: new Counter({
      name: "servicelb_agent_notified_pulls_total",
      help: "Configs fetched by the key a ping named, without listing the store (fetched), or not to be had that way (fallback: the store was listed)",
      labelNames: ["result"],
      registers,
    }),
    reloads: new Counter({
      name: "servicelb_agent_reloads_total",
      help: "HAProxy reloads through the master socket",
      registers,
    }),
    reloadFailures: new Counter({
      name: "servicelb_agent_reload_failures_total",
      help: "Reloads HAProxy reported failed or did not confirm; the previous config kept serving",
      registers,
    }),
    runtimeUpdates: new Counter({
      name: "servicelb_agent_runtime_updates_total",
      help: "Configs applied through the runtime API without a reload",
      registers,
    }),
    runtimeServerChanges: new Counter({
      name: "servicelb_agent_runtime_server_changes_total",
      help: "Server slots changed through the runtime API",
      registers,
    }),
    runtimePatternSwaps: new Counter({
      name: "servicelb_agent_runtime_pattern_swaps_total",
      help: "Pattern files (allow and deny lists) replaced through the runtime API",
      registers,
    }),
    applyFailures: new Counter({
      name: "servicelb_agent_apply_failures_total",
      help: "Configs not applied, by stage (pull, verify, check, apply)",
      labelNames: ["stage"],
      registers,
    }),
    skippedConfigs: new Counter({
      name: "servicelb_agent_skipped_configs_total",
      help: "Config keys skipped because their object was missing or did not verify (digest, metadata); the next key down was taken",
      registers,
    }),
    pullSeconds: new Histogram({
      name: "servicelb_agent_pull_duration_seconds",
      help: "Listing and fetching a config from the store",
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    applySeconds: new Histogram({
      name: "servicelb_agent_apply_duration_seconds",
      help: "From a fetched config to HAProxy running it (check, write, runtime API or reload), by how",
      labelNames: ["how"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    notifications: new Counter({
      name: "servicelb_agent_notifications_total",
      help: "POST /notify requests, by result",
      labelNames: ["result"],
      registers,
    }),
    loopFailures: new Counter({
      name: "servicelb_agent_loop_failures_total",
      help: "Failed runs of the agent's loops (poll, status, certificates, traffic)",
      labelNames: ["loop"],
      registers,
    }),
    haproxyRestarts: new Counter({
      name: "servicelb_agent_haproxy_restarts_total",
      help: "HAProxy brought back after a death, by cause (master-exited: the master was restarted; worker-lost: its worker died under it and a reload forked a new one)",
      labelNames: ["cause"],
      registers,
    }),
    haproxyQuickCrashes: new Gauge({
      name: "servicelb_agent_haproxy_quick_crashes",
      help: "HAProxy masters in a row held against their config: died before serving, or before the config was known good (0: the last one was not)",
      registers,
    }),
    haproxyRestartDelay: new Gauge({
      name: "servicelb_agent_haproxy_restart_delay_seconds",
      help: "Delay before the latest HAProxy restart (0: at once; more: backing off a master that keeps crashing)",
      registers,
    }),
    haproxyRecoverySeconds: new Histogram({
      name: "servicelb_agent_haproxy_recovery_seconds",
      help: "From HAProxy's death (master or worker) to a new worker serving, by cause",
      labelNames: ["cause"],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    storeFailures: new Counter({
      name: "servicelb_agent_store_failures_total",
      help: "Failed store requests, by operation (list, get, put) and reason (deadline: no complete answer within --store-timeout; too-large: over --max-config-size; stopping; error)",
      labelNames: ["operation", "reason"],
      registers,
    }),
    lastSuccessfulPull: new Gauge({
      name: "servicelb_agent_last_successful_pull_timestamp_seconds",
      help: "When the agent last completed a look at the store (pin.json, the listing or the pin, and the fetch of the config it names if there was one)",
      registers,
    }),
    // Label names as HAProxy's exporter has them (proxy, server), so that `on(pod, proxy)` joins;
    // the Service's own under service_*, which a PodMonitor's target labels (namespace) never clash with.
    backendInfo: new Gauge({
      name: "servicelb_backend_info",
      help: "1 for each backend of the running config that serves a Service port (a spare while it holds one): join HAProxy's haproxy_backend_* and haproxy_server_* series on proxy",
      labelNames: ["proxy", "service_namespace", "service_name", "service_port"],
      registers,
      collect() {
        this.reset();
        for (const b of series().backends)
          this.set(
            { proxy: b.backend, service_namespace: b.namespace, service_name: b.service, service_port: b.port },
            1,
          );
      },
    }),
    serverInfo: new Gauge({
      name: "servicelb_server_info",
      help: "1 for each server slot of the running config that carries an endpoint (free slots have none): its address",
      labelNames: ["proxy", "server", "address"],
      registers,
      collect() {
        this.reset();
        for (const s of series().servers) this.set({ proxy: s.backend, server: s.server, address: s.address }, 1);
      },
    }),
    configInfo: new Gauge({
      name: "servicelb_agent_config_info",
      help: '1 for the config HAProxy runs: its key in the store ("" when not known) and digest',
      labelNames: ["key", "sha256"],
      registers,
      collect() {
        this.reset();
        const r = running();
        if (r !== null) this.set({ key: r.key ?? "", sha256: r.sha256 }, 1);
      },
    }),
    pinnedTimestamp: new Gauge({
      name: "servicelb_agent_pinned_timestamp_seconds",
      help: "When the pin this agent honours was set (servicelb pin); 0 while it follows the newest config",
      registers,
      collect() {
        this.set((pinnedAt()?.getTime() ?? 0) / 1000);
      },
    }),
    certificateExpiry: new Gauge({
      name: "servicelb_certificate_expiry_timestamp_seconds",
      help: "When each certificate HAProxy serves expires (notAfter, from show ssl cert), by the file it was loaded from",
      labelNames: ["certificate"],
      registers,
      async collect() {
        const rows = await certificates();
        this.reset();
        for (const c of rows) this.set({ certificate: c.certificate }, c.notAfter.getTime() / 1000);
      },
    }),
    certificateUpdates: new Counter({
      name: "servicelb_certificate_updates_total",
      help: "Renewed certificate files: swapped in through the runtime API (no reload), refused (bad or gone: the served one stays), or failed (the runtime API did not take it: tried again)",
      labelNames: ["result"],
      registers,
    }),
    certificateRefused: new Gauge({
      name: "servicelb_certificate_refused",
      help: "1 for each certificate file whose contents HAProxy is not given (bad, gone or too large): HAProxy serves the one it has",
      labelNames: ["certificate"],
      registers,
    }),
    pullStale: new Gauge({
      name: "servicelb_agent_pull_stale",
      help: "1 while no pull has completed for longer than --stale-pull-periods poll intervals",
      registers,
      collect() {
        this.set(stale() ? 1 : 0);
      },
    }),
    probePullStale(probe) {
      stale = probe;
    },
    probeRunning(probe) {
      running = probe;
    },
    probePinnedAt(probe) {
      pinnedAt = probe;
    },
    probeCertificates(probe) {
      certificates = probe;
    },
  });
}
