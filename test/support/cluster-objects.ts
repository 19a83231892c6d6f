/* Services, EndpointSlices and Endpoints as the API server stores them, for the tests that talk to the Kubernetes API emulator. */

import type { KubeObject } from "../../shared/dev/kube-api-emulator.js";

export function service(namespace: string, name: string, labels: Record<string, string> = {}): KubeObject {
  return {
    metadata: { name, namespace, labels, creationTimestamp: "2024-01-02T03:04:05Z" },
    spec: {
      type: "ClusterIP",
      clusterIP: "10.0.0.10",
      ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: "web" }],
      selector: { app: name },
    },
  };
}

export function slice(namespace: string, service: string, ip: string): KubeObject {
  return {
    metadata: {
      name: `${service}-abcde`,
      namespace,
      labels: { "kubernetes.io/service-name": service },
      creationTimestamp: "2024-01-02T03:04:06Z",
    },
    addressType: "IPv4",
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports: [{ name: "web", port: 8080, protocol: "TCP" }],
  };
}

export function endpoints(namespace: string, name: string, ip: string): KubeObject {
  return {
    metadata: { name, namespace, creationTimestamp: "2024-01-02T03:04:07Z" },
    subsets: [{ addresses: [{ ip }], ports: [{ name: "web", port: 8080, protocol: "TCP" }] }],
  };
}
