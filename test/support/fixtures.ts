/** Builders for Kubernetes objects in their wire JSON shape, for snapshots in tests and benchmarks. */
export interface KubeFixture {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; [key: string]: unknown };
  [key: string]: unknown;
}

export interface PortSpec {
  port: number;
  name?: string;
  targetPort?: number | string;
  protocol?: string;
}

export interface ServiceSpec {
  namespace?: string;
  type?: string;
  clusterIP?: string;
  sessionAffinity?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
  /** metadata.creationTimestamp (RFC 3339); absent by default, like a hand-made object. */
  created?: string;
  selector?: Record<string, string>;
}

export function service(name: string, ports: PortSpec[], spec: ServiceSpec = {}): KubeFixture {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name,
      namespace: spec.namespace ?? "default",
      labels: spec.labels,
      annotations: spec.annotations,
      resourceVersion: spec.resourceVersion ?? "1",
      creationTimestamp: spec.created,
    },
    spec: {
      type: spec.type ?? "ClusterIP",
      clusterIP: spec.clusterIP ?? "10.96.0.1",
      sessionAffinity: spec.sessionAffinity ?? "None",
      ...(spec.selector ? { selector: spec.selector } : {}),
      ports: ports.map((p) => ({
        name: p.name,
        port: p.port,
        targetPort: p.targetPort ?? p.port,
        protocol: p.protocol ?? "TCP",
      })),
    },
  };
}

export interface SliceEndpoint {
  ip: string;
  ready?: boolean;
}

/** One EndpointSlice of a Service: `ports` are the slice ports (named after the Service ports). */
export function slice(
  serviceName: string,
  ports: Array<{ name?: string; port: number; protocol?: string }>,
  endpoints: Array<string | SliceEndpoint>,
  opts: { namespace?: string; name?: string; addressType?: string; resourceVersion?: string } = {},
): KubeFixture {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: opts.name ?? `${serviceName}-${Math.abs(hash(JSON.stringify(endpoints))).toString(36)}`,
      namespace: opts.namespace ?? "default",
      labels: { "kubernetes.io/service-name": serviceName },
      resourceVersion: opts.resourceVersion ?? "1",
    },
    addressType: opts.addressType ?? "IPv4",
    ports: ports.map((p) => ({ name: p.name ?? "", port: p.port, protocol: p.protocol ?? "TCP" })),
    endpoints: endpoints.map((e) => {
      const ep = typeof e === "string" ? { ip: e } : e;
      return { addresses: [ep.ip], conditions: { ready: ep.ready ?? true } };
    }),
  };
}

/**
 * A Service with these ports (named p<port>, up to 55535), every one on the same pods, which listen
 * on the port number + 10000; its slices hold 100 ports each, the most one may.
 */
export function wideService(
  name: string,
  ports: readonly number[],
  pods: Array<string | SliceEndpoint>,
  spec: ServiceSpec = {},
): KubeFixture[] {
  const named = ports.map((port) => ({ port, name: `p${port}` }));
  const slices: KubeFixture[] = [];
  for (let i = 0; i < named.length; i += 100)
    slices.push(
      slice(
        name,
        named.slice(i, i + 100).map((p) => ({ name: p.name, port: p.port + 10_000 })),
        pods,
        { namespace: spec.namespace, name: `${name}-${i / 100}` },
      ),
    );
  return [service(name, named, spec), ...slices];
}

export function list(items: unknown[], resourceVersion = "100"): Record<string, unknown> {
  return { apiVersion: "v1", kind: "List", metadata: { resourceVersion }, items };
}

function hash(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  return h;
}

/**
 * An agent's report as `status/<node>.json` holds it, listing the config digests it verifies;
 * without `digests`, a report as agents from before tree1 write it.
 */
export function agentReport(node: string, digests?: string[]): Record<string, unknown> {
  return {
    node,
    applied: null,
    lastError: null,
    backoff: null,
    haproxy: { running: true },
    reportIntervalSeconds: 30,
    reportedAt: new Date().toISOString(),
    agent: digests ? "servicelb/0.2.0" : "servicelb/0.1.0",
    ...(digests ? { digests } : {}),
  };
}
