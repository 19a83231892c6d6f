/**
 * The synthetic cluster every benchmark uses, the same shape as the Go render anchor
 * (../shared/anchors/go-render): service i has `endpoints` pods at 10.<i/256%256>.<i%256>.<j>:8080,
 * ClientIP affinity when i%3==0, a host when i%5==0.
 */
export function syntheticCluster(services: number, endpoints: number, revision = 1000): Record<string, unknown> {
  const items: unknown[] = [];
  for (let i = 0; i < services; i++) {
    const name = `svc-${i}`;
    items.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name,
        namespace: "default",
        resourceVersion: String(revision),
        annotations: i % 5 === 0 ? { "serviceloadbalancer/lb.host": `${name}.example.com` } : undefined,
      },
      spec: { type: "ClusterIP", clusterIP: "10.96.0.1", sessionAffinity: i % 3 === 0 ? "ClientIP" : "None", ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }] },
    });
    const eps = [];
    for (let j = 0; j < endpoints; j++) eps.push({ addresses: [`10.${Math.floor(i / 256) % 256}.${i % 256}.${j}`], conditions: { ready: true } });
    items.push({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: `${name}-x`, namespace: "default", labels: { "kubernetes.io/service-name": name }, resourceVersion: String(revision) },
      addressType: "IPv4",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: eps,
    });
  }
  return { apiVersion: "v1", kind: "List", metadata: { resourceVersion: String(revision) }, items };
}
