import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { tryLines } from "./try-lines.js";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { loadKubeConfig } from "../adapters/kube-config.js";
import { packageRoot } from "../adapters/templates.js";
import type { Console } from "./console-log.js";
import { DemoCluster } from "./demo-cluster.js";
import type { StageTracer } from "../adapters/stage-trace.js";
import { startEventBridge, type GateFactory } from "./event-bridge.js";
import { KubeApiEmulator } from "./kube-api-emulator.js";
import { assertPortsFree, haproxyState, waitForHaproxy } from "./haproxy-listens.js";
import { stackPorts, waitForPort } from "./ports.js";
import { nodeLines, nodeRenderEnv, stackCanaryEnv, stackNodes } from "./stack-nodes.js";

export interface LocalStackOptions {
  dataDir: string;
  /** The demo cluster file; ignored when a kubeconfig is used. */
  clusterFile: string;
  kubeconfig?: string;
  /** Use the demo cluster even when a kubeconfig exists. */
  demo: boolean;
  httpPort: number;
  statsPort: number;
  /** Agents, each with its own HAProxy (stack-nodes.ts); default 1. */
  nodes?: number;
  /** The object store's port; unset, the one this data dir had last time, or a free one. */
  storePort?: number;
  resyncMs: number;
  /**
   * When the event bridge hands changes to reconcile: at once unless set; bench/e2e sets a peer
   * controller's update policy here, named in the summary.
   */
  delivery?: { name: string; gate: GateFactory };
  /** Stage timing of the emulator, the demo cluster file and the event bridge (bench/e2e). */
  tracer?: StageTracer;
  console: Console;
  /** Where the summary goes (stdout for people). */
  print: (text: string) => void;
  /** How long the banner waits for HAProxy to listen before it says that it does not (default 20 s). */
  haproxyWaitMs?: number;
  /** Aborts a start in progress (Ctrl-C before the banner): what started is stopped. */
  signal?: AbortSignal;
}

/**
 * A child process whose output lines (pino JSON, or text) go to the console under its name. It
 * runs in a process group of its own (Ctrl-C is the stack's to handle, in order) and stops by
 * itself when the stack is gone (exit-with-parent.ts).
 */
function child(name: string, args: string[], env: Record<string, string>, out: Console): ChildProcess {
  // Beside this module in the build that runs it (the stack runs from compiled JavaScript only).
  const guard = new URL("exit-with-parent.js", import.meta.url).href;
  // Stack traces that name modules (the bundles' source maps), at a cold-start cost that only a deployment minds.
  const p = spawn(process.execPath, ["--enable-source-maps", "--import", guard, ...args], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  for (const stream of [p.stdout!, p.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      if (line.includes("NodeVersionSupportWarning") || line.startsWith("(Use `node --trace-warnings")) return;
      out.relay(name, line);
    });
  }
  p.on("exit", (code, signal) => out.log.info(`[${name}] exited (${signal ?? code})`));
  return p;
}

function stopChild(p: ChildProcess, graceMs = 10_000): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const kill = setTimeout(() => p.kill("SIGKILL"), graceMs);
    p.once("exit", () => {
      clearTimeout(kill);
      done();
    });
    p.kill("SIGTERM");
  });
}

/** s3rver accepts these and no others. */
const S3RVER_CREDENTIALS = { AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER" };
const S3RVER_ENV = Object.entries(S3RVER_CREDENTIALS)
  .map(([k, v]) => `${k}=${v}`)
  .join(" ");

function defaultKubeconfig(): string | undefined {
  const candidates = [process.env.KUBECONFIG?.split(":")[0], join(homedir(), ".kube", "config")];
  return candidates.find((f): f is string => !!f && existsSync(f));
}

/**
 * `npm start`: the whole pipeline on one machine, each part a separate process on loopback —
 * s3rver as the object store, the reconcile and render functions under functions-framework,
 * one agent with HAProxy per node (one unless told) — fed by an event bridge from the current kubeconfig's cluster or, when
 * there is none, from the embedded demo cluster. Resolves to a stop function.
 */
export async function startLocalStack(o: LocalStackOptions): Promise<() => Promise<void>> {
  const root = packageRoot();
  const log = o.console.log;
  const data = resolve(o.dataDir);
  const nodes = stackNodes(data, o.nodes ?? 1);
  mkdirSync(join(data, "s3"), { recursive: true });
  for (const n of nodes) for (const d of [dirname(n.configPath), n.stateDir]) mkdirSync(d, { recursive: true });
  const masterSockets = nodes.map((n) => n.masterSocket);
  const haproxy = spawnSync("haproxy", ["-v"]).status === 0;
  // Before anything starts: HAProxy would otherwise retry the bind forever behind a cheerful banner.
  if (haproxy)
    await assertPortsFree(
      [
        { port: o.httpPort, flag: "--http-port" },
        { port: o.statsPort, flag: "--stats-port" },
      ],
      masterSockets,
    );
  const ports = await stackPorts(data, o.storePort === undefined ? {} : { s3: o.storePort });
  const stops: Array<() => Promise<void> | void> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop();
  };

  try {
    let kubeconfig = o.demo ? undefined : (o.kubeconfig ?? defaultKubeconfig());
    let clusterLabel: string;
    let demo: DemoCluster | undefined;
    if (kubeconfig) {
      clusterLabel = `the cluster of ${kubeconfig} (context ${loadKubeConfig({ kubeconfig }).getCurrentContext()})`;
    } else {
      const api = await new KubeApiEmulator({ trace: o.tracer?.("emulator") }).start();
      stops.push(() => api.stop());
      demo = new DemoCluster(o.clusterFile, api, log, o.tracer?.("stack"));
      await demo.load();
      demo.watch();
      stops.push(() => demo!.stop());
      kubeconfig = await api.writeKubeconfig({ dir: data });
      clusterLabel = `the demo cluster in ${o.clusterFile} (edit it: changes are served within a second)`;
    }

    // Beside this module in the build, as the exit guard is.
    const s3rver = fileURLToPath(new URL("s3rver-main.js", import.meta.url));
    const s3 = child(
      "s3",
      [
        s3rver,
        "--directory",
        join(data, "s3"),
        "--address",
        "127.0.0.1",
        "--port",
        String(ports.s3),
        "--silent",
        "--configure-bucket",
        "servicelb",
      ],
      {},
      o.console,
    );
    stops.push(() => stopChild(s3));
    await waitForPort(ports.s3, "s3rver");

    const token = randomBytes(24).toString("hex");
    const storeEnv = {
      SERVICELB_STORE: "s3://servicelb/local",
      SERVICELB_STORE_ENDPOINT: `http://127.0.0.1:${ports.s3}`,
      SERVICELB_STORE_PATH_STYLE: "true",
      ...S3RVER_CREDENTIALS,
      AWS_REGION: "us-east-1",
      // The local stack runs on the development Node, 20 included; the SDK's notice about 2027
      // releases is in docs/development.md#builds-and-tests, not in every log.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
    };
    const renderEnv = {
      SERVICELB_KUBECONFIG: kubeconfig,
      ...nodeRenderEnv(data, nodes.length),
      SERVICELB_HTTP_PORT: String(o.httpPort),
      SERVICELB_STATS_PORT: String(o.statsPort),
      SERVICELB_HARD_STOP_AFTER: "10s",
    };
    const ff = join(root, "node_modules", "@google-cloud", "functions-framework", "build", "src", "main.js");
    const fn = (target: string, signature: string, port: number, env: Record<string, string>) =>
      child(
        target,
        [
          ff,
          "--source",
          join(root, "dist", "bundle", `${target}.mjs`),
          "--target",
          target,
          "--signature-type",
          signature,
          "--port",
          String(port),
        ],
        env,
        o.console,
      );
    const agentUrl = (n: (typeof nodes)[number]) => `http://${n.address}:${ports.agent}`;
    const several = nodes.length > 1;
    const canaryEnv = several ? stackCanaryEnv(process.env) : {};
    const reconcile = fn("reconcile", "cloudevent", ports.reconcile, {
      ...storeEnv,
      ...renderEnv,
      ...(haproxy ? { SERVICELB_AGENTS: nodes.map(agentUrl).join(","), SERVICELB_NOTIFY_TOKEN: token } : {}),
      ...canaryEnv,
    });
    stops.push(() => stopChild(reconcile));
    const render = fn("render", "http", ports.render, renderEnv);
    stops.push(() => stopChild(render));
    await Promise.all([
      waitForPort(ports.reconcile, "reconcile function"),
      waitForPort(ports.render, "render function"),
    ]);

    if (haproxy) {
      for (const n of nodes) {
        const agent = child(
          several ? n.name : "agent",
          [
            join(root, "bin", "servicelb.js"),
            "agent",
            "--listen",
            `${n.address}:${ports.agent}`,
            "--node-name",
            n.name,
            "--config-path",
            n.configPath,
            "--state-dir",
            n.stateDir,
            "--master-socket",
            n.masterSocket,
            "--poll-interval",
            "5s",
            "--min-reload-interval",
            "200ms",
            // Several nodes report often: the gates judge the figures of the last reports.
            "--status-interval",
            several ? "2s" : "10s",
            ...(several ? ["--node-address", n.address, "--canary"] : []),
          ],
          { ...storeEnv, SERVICELB_NOTIFY_TOKEN: token },
          o.console,
        );
        stops.push(() => stopChild(agent, 20_000));
      }
      await Promise.all(nodes.map((n) => waitForPort(ports.agent, `agent ${n.name}`, 20_000, n.address)));
    }

    const stopBridge = startEventBridge({
      kc: loadKubeConfig({ kubeconfig }),
      sink: `http://127.0.0.1:${ports.reconcile}/`,
      resyncMs: o.resyncMs,
      gate: o.delivery?.gate,
      log,
      trace: o.tracer?.("bridge"),
    });
    stops.push(stopBridge);

    const listens = (n: (typeof nodes)[number]) => ({
      host: n.address,
      httpPort: o.httpPort,
      statsPort: o.statsPort,
      masterSockets,
      agentStatusUrl: `${agentUrl(n)}/status`,
    });
    const served = haproxy
      ? await Promise.all(
          nodes.map((n) => waitForHaproxy({ ...listens(n), timeoutMs: o.haproxyWaitMs ?? 20_000, signal: o.signal })),
        )
      : undefined;
    for (const [i, state] of (served ?? []).entries()) {
      if (state.listening) continue;
      const n = nodes[i]!;
      // Say so when it does, so that the banner's NOT LISTENING is not the last word.
      let watching: NodeJS.Timeout | undefined = setInterval(() => {
        void haproxyState(listens(n)).then((now) => {
          if (!now.listening || watching === undefined) return;
          clearInterval(watching);
          watching = undefined;
          log.info(
            `HAProxy${several ? ` of ${n.name}` : ""} listens now: http://${n.address}:${o.httpPort}/   stats http://${n.address}:${o.statsPort}/`,
          );
        });
      }, 1000);
      stops.push(() => {
        clearInterval(watching);
        watching = undefined;
      });
    }

    const store = `--store s3://servicelb/local --store-endpoint http://127.0.0.1:${ports.s3} --store-path-style`;
    const cli = (command: string) => `  ${S3RVER_ENV} npx servicelb ${command} ${store}`;
    const lines = [
      "",
      "servicelb is running locally:",
      `  cluster          ${clusterLabel}`,
      `  object store     s3rver at http://127.0.0.1:${ports.s3} (bucket servicelb, data in ${join(data, "s3")})`,
      `  reconcile        http://127.0.0.1:${ports.reconcile}/ (CloudEvents from the event bridge${o.delivery ? `, held back by ${o.delivery.name}'s update policy` : ""})`,
      `  dry run          http://127.0.0.1:${ports.render}/ (GET: the live cluster; POST: a snapshot)`,
      ...nodeLines(nodes, served, { http: o.httpPort, stats: o.statsPort, agent: ports.agent }, canaryEnv),
      "",
      "Try:",
      ...(served?.[0]?.listening && demo ? tryLines(o.clusterFile, o.httpPort, nodes[0]!.address) : []),
      `  curl 'http://127.0.0.1:${ports.render}/?format=json'`,
      ...(haproxy ? [`  curl ${agentUrl(nodes[0]!)}/status`] : []),
      "",
      "Published configs in the local store (s3rver's fixed credentials):",
      cli("history"),
      cli("diff latest~1 latest"),
      ...(haproxy ? [cli(several ? "status --nodes" : "status")] : []),
      "",
      "Ctrl-C stops everything.",
      "",
    ];
    o.print(lines.join("\n"));
    return stopAll;
  } catch (err) {
    await stopAll();
    throw err;
  }
}
