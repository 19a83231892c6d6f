import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLogger } from "../../shared/adapters/log.js";
import type { Agent } from "../../shared/agent/agent.js";
import type { FunctionSettings } from "../../shared/app/function-options.js";
import { createReconciler, type Reconciler } from "../../shared/app/reconcile.js";
import { KubeApiEmulator, type KubeObject } from "../../shared/dev/kube-api-emulator.js";
import { echoPods, testNode, TOKEN, type Echo, type Node } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { requireHaproxy } from "../support/haproxy.js";
import { waitFor } from "../support/net.js";
import { podName, ROLLOUT_PODS, rolloutShortfalls, rolloutSteps, runRollout } from "../support/rollout.js";
import { startS3, type TestS3 } from "../support/s3.js";

// A rollout drops nothing through the whole control path: the same 100 endpoint changes as
// agent-rollout-load.test.ts, each written to the Kubernetes API emulator and delivered to the
// reconcile function as ApiServerSource's event, which a warm instance serves by its head start
// (the slice read again and laid over its last list) before its full list, while clients keep
// sending requests through HAProxy. Every answer must come from a pod that was an endpoint.

let s3: TestS3;
let pods: Echo;
let n: Node;
let api: KubeApiEmulator;

beforeAll(async () => {
  requireHaproxy();
  s3 = await startS3();
  pods = await echoPods(Object.fromEntries(ROLLOUT_PODS.map((ip) => [ip, podName(ip)])), { slowMs: 800 });
  n = await testNode(s3);
  api = await new KubeApiEmulator().start();
});

afterAll(async () => {
  await api?.stop();
  n?.cleanup();
  await pods?.close();
  await s3?.stop();
});

function reconcilerFor(agent: Agent, kubeconfig: string): Reconciler {
  const settings: FunctionSettings = {
    options: n.lb.options,
    kubeconfig,
    maxBodyBytes: 1 << 20,
    passTimeoutMs: 30_000,
    confirmDelayMs: 50,
    digest: "auto",
    store: { url: `s3://${s3.bucket}/${n.prefix}`, endpoint: s3.endpoint, forcePathStyle: true, retain: 50 },
    notify: {
      agents: [agent.url],
      agentPort: "agent",
      token: TOKEN,
      timeoutMs: 2000,
      concurrency: 64,
      deadlineMs: 5000,
    },
  };
  // The node's store is closed by the node's clean-up.
  return createReconciler(settings, { log: createLogger("rollout-test", "silent"), store: n.store });
}

it("drops no request and reloads nothing over 100 endpoint changes delivered as events and served by head starts", async () => {
  const { initial, steps } = rolloutSteps(pods.port);
  api.upsert("Service", service("web", [{ port: 80, targetPort: pods.port }]) as unknown as KubeObject);
  const setEndpoints = (ips: string[]) =>
    api.upsert("EndpointSlice", slice("web", [{ port: pods.port }], ips, { name: "web-a" }) as unknown as KubeObject);
  setEndpoints(initial);
  const kubeconfig = await api.writeKubeconfig({ dir: mkdtempSync(join(tmpdir(), "servicelb-kube-")) });
  const agent = await n.start();
  const reconciler = reconcilerFor(agent, kubeconfig);
  const headStarts: string[] = [];
  const digests: string[] = [];
  try {
    // The agent's report says it verifies tree1: the function publishes by tree1 from its first pass.
    await waitFor("the agent's report", async () => ((await n.store.listStatuses()).length > 0 ? true : undefined));
    await reconciler.reconcileNow({ id: "warm", type: "test" });
    const result = await runRollout(
      {
        httpPort: n.lb.options.httpPort,
        path: "/web",
        publish: async (ips, step) => {
          const changed = setEndpoints(ips);
          const result = await reconciler.reconcile({
            specversion: "1.0",
            id: `step-${step}`,
            type: "dev.knative.apiserver.resource.update",
            source: "https://kube",
            data: changed,
          });
          headStarts.push(result.headStart?.status ?? "none");
          digests.push(result.sha256!.replace(/:.*/, ""));
          expect(["published", "unchanged"], `step ${step}`).toContain(result.status);
          return { key: result.newestKey!, sha256: result.sha256! };
        },
        // The reconcile function pinged the agent itself.
        notify: async () => undefined,
        applied: async (key) => {
          await waitFor(
            `${key} applied`,
            async () => ((agent.status().applied?.key ?? "") >= key ? true : undefined),
            20_000,
          );
        },
        reloads: () => n.reloads(),
      },
      initial,
      steps,
    );
    const { summary, shortfalls } = rolloutShortfalls(result, agent.status().lastError);
    expect(shortfalls, summary).toEqual([]);
    // The changes went the head start's way.
    expect(headStarts.filter((s) => s === "published").length, headStarts.join(",")).toBeGreaterThan(90);
    expect(new Set(digests)).toEqual(new Set(["tree1"]));
  } finally {
    await agent.stop();
  }
}, 300_000);
