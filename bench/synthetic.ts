import { type Snapshot, snapshotFromItems, validateItem } from "../shared/core/kubernetes/snapshot.js";

/**
 * The synthetic cluster every benchmark uses, and the one the Go render anchor renders
 * (bench/go-anchor.ts writes it to a file for bench/anchors/go-render): service i has
 * `endpoints` pods at 10.<i/256%256>.<i%256>.<j>:8080, ClientIP affinity when i%3==0, a host
 * when i%5==0. With `settings`, the per-Service settings
 * annotations too (settingsOf). Items come in the API server's list order (by name: svc-0,
 * svc-1, svc-10, …), which a warm instance relies on to carry a pass's order over to the next.
 */
export function syntheticCluster(
  services: number,
  endpoints: number,
  revision = 1000,
  settings = false,
): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "List",
    metadata: { resourceVersion: String(revision) },
    items: [...syntheticItems(services, endpoints, revision, settings)],
  };
}

/**
 * The items of syntheticCluster one at a time, as the pages of a live list hand them out: a caller
 * that keeps only what it makes of each (a validated copy) never holds the raw objects side by side.
 */
export function* syntheticItems(
  services: number,
  endpoints: number,
  revision = 1000,
  settings = false,
): Generator<Record<string, unknown>> {
  const byName = Array.from({ length: services }, (_, i) => i).sort((a, b) =>
    `svc-${a}` < `svc-${b}` ? -1 : `svc-${a}` > `svc-${b}` ? 1 : 0,
  );
  for (const i of byName) {
    const name = `svc-${i}`;
    yield {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name,
        namespace: "default",
        resourceVersion: String(revision),
        annotations: annotationsOf(i, name, settings),
      },
      spec: {
        type: "ClusterIP",
        clusterIP: "10.96.0.1",
        sessionAffinity: i % 3 === 0 ? "ClientIP" : "None",
        ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
      },
    };
    const eps = [];
    for (let j = 0; j < endpoints; j++)
      eps.push({ addresses: [`10.${Math.floor(i / 256) % 256}.${i % 256}.${j}`], conditions: { ready: true } });
    yield {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: `${name}-x`,
        namespace: "default",
        labels: { "kubernetes.io/service-name": name },
        resourceVersion: String(revision),
      },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: eps,
    };
  }
}

/**
 * A mix of per-Service settings: every other Service has a timeout and an HTTP check, a quarter an
 * allow list and a rate limit, another quarter maxconn, HTTP/2 and PROXY protocol to its pods.
 */
function annotationsOf(i: number, name: string, settings: boolean): Record<string, string> | undefined {
  const a: Record<string, string> = {};
  const set = (k: string, v: string) => (a[`serviceloadbalancer/lb.${k}`] = v);
  if (i % 5 === 0) set("host", `${name}.example.com`);
  if (settings && i % 2 === 0) {
    set("timeout-server", "30s");
    set("check-http", "/healthz");
  }
  if (settings && i % 4 === 1) {
    set("allow-source-range", "10.0.0.0/8, 192.168.0.0/16, fd00::/8");
    set("rate-limit-rps", "100");
  }
  if (settings && i % 4 === 3) {
    set("maxconn", "100");
    set("backend-protocol", "h2");
    set("proxy-protocol", "v2");
  }
  return Object.keys(a).length > 0 ? a : undefined;
}

/**
 * The synthetic cluster validated item by item, as a live list's pages are (snapshot-source.ts):
 * no JSON text of it (its parse is the list stage's), and no raw object outlives its validation.
 */
export function syntheticSnapshot(services: number, endpoints: number, revision = 1000, settings = false): Snapshot {
  return snapshotFromItems(
    Array.from(syntheticItems(services, endpoints, revision, settings), (item) =>
      validateItem(item, undefined, "live list"),
    ),
    [String(revision)],
  );
}
