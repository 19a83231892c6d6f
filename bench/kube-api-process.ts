/*
 * The Kubernetes API emulator in a process of its own, loaded with N Services × E endpoints
 * (bench/storm): measured in the local stack's process, the emulator shared its one thread with
 * the event bridge's 100,000 deliveries, and the lists it served timed out on that, not on the
 * function.
 *   node kube-api-process.js --services N --endpoints E --target-port P --dir D
 * Writes D/kubeconfig, then prints one line `ready <url>` and serves until SIGTERM (or its
 * parent's end, through --import exit-with-parent.js).
 */

import { KubeApiEmulator } from "../shared/dev/kube-api-emulator.js";
import { service, slice } from "../test/support/fixtures.js";

const argValue = (name: string): string => {
  const i = process.argv.indexOf(name);
  const value = i >= 0 ? process.argv[i + 1] : undefined;
  if (value === undefined) throw new Error(`kube-api-process: ${name} is required`);
  return value;
};
const count = (name: string): number => {
  const n = Number(argValue(name));
  if (!Number.isInteger(n) || n < 0) throw new Error(`kube-api-process: ${name} must be a whole number, not ${n}`);
  return n;
};

const services = count("--services");
const endpoints = count("--endpoints");
const targetPort = count("--target-port");
const api = new KubeApiEmulator();
for (let i = 0; i < services; i++) {
  const name = `svc-${i}`;
  api.upsert("Service", service(name, [{ name: "http", port: 80, targetPort }]));
  const hosts = Array.from({ length: endpoints }, (_, k) => `10.${(i >> 8) & 255}.${i & 255}.${k + 1}`);
  api.upsert("EndpointSlice", slice(name, [{ name: "http", port: targetPort }], hosts, { name: `${name}-0` }));
}
await api.start();
await api.writeKubeconfig({ dir: argValue("--dir") });
process.on("SIGTERM", () => void api.stop().then(() => process.exit(0)));
console.log(`ready ${api.url}`);
