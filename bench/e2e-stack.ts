/*
 * The local stack as bench/e2e runs it: `node e2e-stack.js <policy> [npm start flags]`, with a
 * delivery policy (servicelb's own, or a peer controller's) in front of the reconcile function
 * and stage timing when SERVICELB_TRACE_FILE is set.
 */

import { tracerFromEnv } from "../shared/adapters/stage-trace.js";
import { localCli } from "../shared/dev/local-cli.js";
import { deliveryGate, parseDeliveryPolicy } from "./delivery-policy.js";

const [node = "node", self = "e2e-stack.js", name = "", ...flags] = process.argv;
const policy = parseDeliveryPolicy(name);
process.exitCode = await localCli([node, self, ...flags], {
  delivery:
    policy.name === "servicelb" ? undefined : { name: policy.name, gate: (deliver) => deliveryGate(policy, deliver) },
  tracer: tracerFromEnv(process.env),
});
