/*
 * The ping receivers of bench/notify, forked by it: N agents' HTTP APIs (agent/http-api.ts
 * itself, the bearer token checked, the body parsed and validated) on loopback, each on a port
 * of its own as each node's agent is, with nothing behind /notify but a clock. Over IPC: it
 * starts them and sends their URLs; asked, it sends when each received its last ping (epoch ms,
 * `performance.timeOrigin + performance.now()`, the same clock as the bench's) and forgets them.
 */

import pino from "pino";
import { type HttpApi, startHttpApi } from "../shared/agent/http-api.js";
import { createAgentMetrics } from "../shared/agent/metrics.js";

export type ReceiverRequest = { type: "start"; count: number; token: string } | { type: "arrivals" } | { type: "stop" };

export type ReceiverMessage =
  | { type: "started"; urls: string[] }
  | { type: "arrivals"; at: number[] }
  | { type: "stopped" };

const send = (m: ReceiverMessage) => process.send!(m);
const log = pino({ level: "silent" });
/** One registry for all: its counters are not what is measured. */
const metrics = createAgentMetrics();
let apis: HttpApi[] = [];
let arrivals: number[] = [];

process.on("message", (m: ReceiverRequest) => {
  void (async () => {
    if (m.type === "start") {
      const expected = async () => m.token;
      for (let i = 0; i < m.count; i++)
        apis.push(
          await startHttpApi({
            host: "127.0.0.1",
            port: 0,
            expectedToken: expected,
            exporter: () => null,
            onNotify: () => {
              arrivals.push(performance.timeOrigin + performance.now());
              return "pull";
            },
            health: async () => ({ ok: true }),
            status: () => ({}),
            metrics,
            log,
          }),
        );
      send({ type: "started", urls: apis.map((a) => a.url) });
    } else if (m.type === "arrivals") {
      send({ type: "arrivals", at: arrivals });
      arrivals = [];
    } else {
      await Promise.all(apis.map((a) => a.close()));
      apis = [];
      send({ type: "stopped" });
      process.disconnect();
    }
  })();
});
