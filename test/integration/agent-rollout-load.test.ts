import { afterAll, beforeAll, expect, it } from "vitest";
import { echoPods, testNode, web, type Echo, type Node } from "../support/agent.js";
import { requireHaproxy } from "../support/haproxy.js";
import { waitFor } from "../support/net.js";
import { podName, ROLLOUT_PODS, rolloutSteps, runRollout } from "../support/rollout.js";
import { startS3, type TestS3 } from "../support/s3.js";

// "A rollout drops nothing": 100 endpoint changes the way Deployments make them (in-place moves,
// moves between slots, disjoint swaps, fast rolls, scale to zero and back), applied through the
// runtime API while clients keep sending requests over kept-alive connections and over a new
// connection per request. Before make-before-break this run answered thousands of 503s.

let s3: TestS3;
let pods: Echo;
let n: Node;

beforeAll(async () => {
  requireHaproxy();
  s3 = await startS3();
  pods = await echoPods(Object.fromEntries(ROLLOUT_PODS.map((ip) => [ip, podName(ip)])));
  n = await testNode(s3);
});

afterAll(async () => {
  n?.cleanup();
  await pods?.close();
  await s3?.stop();
});

it("drops no request, answers from no stale pod and reloads nothing over 100 endpoint changes under load", async () => {
  const { initial, steps } = rolloutSteps(pods.port);
  expect(steps).toHaveLength(100);
  const agent = await n.start();
  try {
    const { keepAlive, fresh, reloads } = await runRollout(
      {
        httpPort: n.lb.options.httpPort,
        path: "/web",
        publish: async (ips, step) => {
          const result = await n.publish(web("web", pods.port, ips), 1000 + step);
          expect(result.status, `step ${step}`).toBe("published");
          return result;
        },
        notify: async (published) => expect((await n.notify(agent, published)).status).toBe(202),
        applied: async (key) => {
          await waitFor(`${key} applied`, async () => (agent.status().applied?.key === key ? true : undefined), 20_000);
        },
        reloads: () => n.reloads(),
      },
      initial,
      steps,
    );
    const summary = `keep-alive: ${keepAlive.ok} ok, ${keepAlive.atZero} 503 at zero, ${keepAlive.failed.length} failed; new connection: ${fresh.ok} ok, ${fresh.atZero} 503 at zero, ${fresh.failed.length} failed; reloads: ${reloads}`;
    const failed = [...keepAlive.failed, ...fresh.failed];
    expect(failed.length, `${summary}; first failures: ${failed.slice(0, 8).join(" | ")}`).toBe(0);
    expect(reloads, summary).toBe(0);
    expect(agent.status().lastError, summary).toBeNull();
    // Traffic really flowed on both kinds of client.
    expect(keepAlive.ok, summary).toBeGreaterThan(steps.length * 5);
    expect(fresh.ok, summary).toBeGreaterThan(steps.length * 5);
  } finally {
    await agent.stop();
  }
  // 100 changes under load take ~20 s alone, several times that on a busy machine: the counts are
  // what is asserted, not the time.
}, 300_000);
