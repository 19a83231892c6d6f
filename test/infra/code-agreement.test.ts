import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, posix } from "node:path";
import { describe, expect, it } from "vitest";
import { agentOptionSpecs, parseAgentOptions, stateFilePath } from "../../shared/agent/options.js";
import { classifyEvent } from "../../shared/app/cloudevents.js";
import { FUNCTION_SETTING_KEYS, loadFunctionSettings, requireStore } from "../../shared/app/function-options.js";
import { envName } from "../../shared/core/settings/settings.js";
import {
  awsCredentialEnvNames,
  envNamesInSources,
  functionsFrameworkEnvNames,
  templateEnvNames,
} from "../support/infra-code.js";
import { findObject, kustomize, REPO, type K8sObject } from "../support/infra-manifests.js";
import { containerOf, PodView, type Container, type ExternalSecrets, type PodSpec } from "../support/infra-pods.js";

// The manifests agree with the code: every variable set is one something reads, the settings
// load as the deployed processes load them, and ports, paths and timings line up with them.

/** The Secrets of the knative-s3 overlay, shaped as its kustomization.yaml tells the operator. */
const OPERATOR_SECRETS: ExternalSecrets = {
  store: {
    url: "s3://servicelb-configs/prod",
    endpoint: "https://s3.example.net",
    region: "eu-west-1",
    "path-style": "true",
    "access-key-id": "AKIAEXAMPLE",
    "secret-access-key": "example-secret",
  },
  "notify-token": { token: "example-token" },
};

const NODE = { "spec.nodeName": "lb-node-1" };

const readBySource = envNamesInSources();
const FUNCTION_ENV = new Set([
  ...FUNCTION_SETTING_KEYS.map(envName),
  ...readBySource,
  ...functionsFrameworkEnvNames(),
  ...awsCredentialEnvNames(),
]);
const AGENT_ENV = new Set([
  ...Object.keys(agentOptionSpecs).map(envName),
  ...readBySource,
  ...awsCredentialEnvNames(),
  ...templateEnvNames(),
]);

function declaredEnv(view: PodView, pod: PodSpec, c: Container): string[] {
  return [...new Set([...(c.env ?? []).map((e) => e.name), ...Object.keys(view.env(pod, c, NODE))])].sort();
}

/** "5m" → 300: the duration syntax of the render options. */
function seconds(duration: string): number {
  const [, n, unit] = /^([0-9]+)(us|ms|s|m|h|d)$/.exec(duration)!;
  return Number(n) * { us: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600, d: 86400 }[unit as "s"];
}

function fileSource(c: Container): string {
  const source = c.env?.find((e) => e.name === "FUNCTION_SOURCE")?.value;
  // tsconfig.json: rootDir ".", outDir "dist"; rolldown.config.mjs bundles dist/functions/<name>.js into dist/bundle/<name>.mjs.
  return source!
    .replace(/^dist\/bundle\/(.*)\.mjs$/, "functions/$1.ts")
    .replace(/^dist\//, "")
    .replace(/\.js$/, ".ts");
}

describe.each(["infra/overlays/knative-s3", "infra/overlays/minio"] as const)("%s", (dir) => {
  const objects = kustomize(dir);
  const view = new PodView(objects, dir.endsWith("knative-s3") ? OPERATOR_SECRETS : {});
  const ksvc = (name: string) => containerOf(findObject(objects, "Service", name, "serving.knative.dev"), name);
  const reconcile = ksvc("reconcile");
  const render = ksvc("render");
  const agentSet = findObject(objects, "DaemonSet", "agent");
  const agent = containerOf(agentSet, "agent");
  const agentService = findObject(objects, "Service", "agent", "") as K8sObject & {
    spec: {
      clusterIP: string;
      selector: Record<string, string>;
      ports: Array<{ name: string; port: number; targetPort: string | number }>;
    };
  };

  const root = mkdtempSync(join(tmpdir(), "servicelb-infra-"));
  const reconcileEnv = view.env(reconcile.pod, reconcile.container, {}, join(root, "reconcile"));
  const settings = loadFunctionSettings(reconcileEnv);
  const agentOptions = parseAgentOptions(view.env(agent.pod, agent.container, NODE, join(root, "agent")));

  it("sets on each workload only variables that the code, functions-framework, the AWS SDK or HAProxy reads", () => {
    for (const { pod, container } of [reconcile, render]) {
      for (const name of declaredEnv(view, pod, container))
        expect(FUNCTION_ENV.has(name), `${container.name}: ${name}`).toBe(true);
    }
    for (const name of declaredEnv(view, agent.pod, agent.container))
      expect(AGENT_ENV.has(name), `agent: ${name}`).toBe(true);
  });

  it("starts the reconcile function: a store, the agents' Service, a readable notify token", () => {
    expect(requireStore(settings).url).toMatch(/^s3:\/\//);
    expect(settings.notify.agentService).toEqual({
      namespace: agentService.metadata.namespace,
      name: agentService.metadata.name,
    });
    expect(settings.notify.tokenFile).toBeDefined();
  });

  it("gives the dry run the render options reconcile publishes with", () => {
    const dryRun = loadFunctionSettings(view.env(render.pod, render.container, {}, join(root, "render")));
    expect(dryRun.options).toEqual(settings.options);
    expect(dryRun.store).toBeUndefined();
  });

  it("starts the agent with the reconcile function's store and the node's name", () => {
    expect(agentOptions.store).toBe(settings.store!.url);
    expect(agentOptions.storeEndpoint).toBe(settings.store!.endpoint);
    expect(agentOptions.storePathStyle).toBe(settings.store!.forcePathStyle);
    expect(agentOptions.nodeName).toBe(NODE["spec.nodeName"]);
    expect(agentOptions.notifyTokenFile).toBeDefined();
  });

  it("reaches the agent where it listens: container port, probes, headless Service and notifier agree", () => {
    const port = agent.container.ports?.find((p) => p.name === "agent");
    expect(port?.containerPort).toBe(agentOptions.listen.port);
    expect(port?.hostPort).toBeUndefined();
    expect(agent.container.livenessProbe?.httpGet?.port).toBe("agent");
    expect(agent.container.readinessProbe?.httpGet?.path).toBe("/healthz");
    expect(agentService.spec.clusterIP).toBe("None");
    const labels = (agentSet as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } })
      .spec.template.metadata.labels;
    expect(labels).toMatchObject(agentService.spec.selector);
    // The notifier takes the slice port by name (SERVICELB_AGENT_PORT, default "agent").
    const sp = agentService.spec.ports.find((p) => p.name === settings.notify.agentPort);
    expect(sp?.targetPort).toBe("agent");
  });

  it("opens on the node exactly HAProxy's frontends (HTTP, HTTPS, TCP services); the stats page stays on loopback", () => {
    const o = settings.options;
    const hostPorts = (agent.container.ports ?? [])
      .filter((p) => p.hostPort !== undefined)
      .map((p) => [p.hostPort, p.containerPort]);
    expect(hostPorts).toEqual(
      [o.httpPort, o.httpsPort, ...o.tcpServices.map((s) => s.port)].map((port) => [port, port]),
    );
    expect(agent.container.ports?.some((p) => p.containerPort === o.statsPort)).toBe(false);
    expect(o.statsBind).toBe("127.0.0.1");
    expect(agent.pod.nodeSelector).toEqual({ "servicelb/loadbalancer": "true" });
  });

  it("keeps a load balancer on every labelled node: tainted ones too, above ordinary pods, evicted one node at a time", () => {
    // A labelled node with any NoSchedule taint (a dedicated node) still gets its agent.
    expect(agent.pod.tolerations).toContainEqual({ operator: "Exists", effect: "NoSchedule" });
    expect(agent.pod.tolerations?.some((t) => t.effect === undefined || t.effect === "NoExecute")).toBe(false);
    const priority = findObject(objects, "PriorityClass", agent.pod.priorityClassName ?? "(none)") as K8sObject & {
      value: number;
      globalDefault?: boolean;
    };
    expect(priority.value).toBeGreaterThan(0);
    expect(priority.value).toBeLessThan(2_000_000_000); // system-cluster-critical and system-node-critical stay above
    expect(priority.globalDefault).not.toBe(true);
    const pdbs = objects.filter((o) => o.kind === "PodDisruptionBudget") as Array<
      K8sObject & {
        spec: { maxUnavailable?: number; minAvailable?: number; selector: { matchLabels: Record<string, string> } };
      }
    >;
    const labels = (agentSet as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } })
      .spec.template.metadata.labels;
    const agentPdbs = pdbs.filter((p) =>
      Object.entries(p.spec.selector.matchLabels).every(([k, v]) => labels[k] === v),
    );
    expect(agentPdbs.map((p) => p.spec)).toEqual([
      { maxUnavailable: 1, selector: { matchLabels: agentService.spec.selector } },
    ]);
  });

  it("lets old HAProxy workers finish (hard-stop-after) before the kubelet kills the pod", () => {
    expect(agent.pod.terminationGracePeriodSeconds).toBeGreaterThan(seconds(settings.options.hardStopAfter));
  });

  it("puts every file HAProxy and the agent write on a writable volume, the root file system read-only", () => {
    const writable = (agent.container.volumeMounts ?? []).filter(
      (m) => !m.readOnly && agent.pod.volumes?.find((v) => v.name === m.name)?.emptyDir,
    );
    const written = [
      agentOptions.configPath,
      stateFilePath(agentOptions),
      agentOptions.masterSocket,
      settings.options.statsSocket,
      settings.options.serverStateFile,
      // `haproxy -c` checks candidates under os.tmpdir(); TMPDIR is not set.
      posix.join("/tmp", "haproxy-check-x", "haproxy.cfg"),
    ];
    for (const file of written) {
      expect(
        writable.some((m) => dirname(file) === m.mountPath || dirname(file).startsWith(`${m.mountPath}/`)),
        file,
      ).toBe(true);
    }
    expect(agent.container.securityContext?.readOnlyRootFilesystem).toBe(true);
    expect(agent.pod.automountServiceAccountToken).toBe(false);
  });

  it("runs the function each Knative Service names: module, registered target and signature", () => {
    for (const { container } of [reconcile, render, ksvc("dead-letter")]) {
      const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value]));
      const register =
        env.FUNCTION_SIGNATURE_TYPE === "cloudevent"
          ? "cloudEvent"
          : env.FUNCTION_SIGNATURE_TYPE === "http"
            ? "http"
            : "?";
      const source = readFileSync(join(REPO, fileSource(container)), "utf8");
      expect(source).toContain(`functions.${register}("${env.FUNCTION_TARGET}"`);
    }
  });

  it("subscribes reconcile to events it acts on: ApiServerSource references of what the snapshot lists, PingSource ticks", () => {
    const sources = ["cluster-changes", "gateway-changes"].map(
      (name) =>
        findObject(objects, "ApiServerSource", name) as unknown as {
          spec: { mode: string; resources: Array<{ apiVersion: string; kind: string }> };
        },
    );
    for (const source of sources) expect(source.spec.mode).toBe("Reference");
    for (const r of sources.flatMap((s) => s.spec.resources)) {
      for (const verb of ["add", "update", "delete"]) {
        const event = {
          specversion: "1.0",
          id: "1",
          type: `dev.knative.apiserver.ref.${verb}`,
          source: "https://10.96.0.1:443",
          data: { apiVersion: r.apiVersion, kind: r.kind, namespace: "shop", name: "web" },
        };
        expect(classifyEvent(event, settings.options).verdict, `${r.kind} ${verb}`).toBe("relevant");
      }
    }
    const ping = findObject(objects, "PingSource", "resync") as unknown as { spec: { data: string } };
    const tick = {
      specversion: "1.0",
      id: "2",
      type: "dev.knative.sources.ping",
      source: "/apis/v1/namespaces/servicelb/pingsources/resync",
      data: ping.spec.data,
    };
    expect(classifyEvent(tick, settings.options).verdict).toBe("resync");
  });
});
