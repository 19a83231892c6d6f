import { describe, expect, it } from "vitest";
import { KUSTOMIZATIONS, kustomize, type K8sObject } from "../support/infra-manifests.js";
import { podSpecOf } from "../support/infra-pods.js";
import { validateObject } from "../support/infra-schemas.js";

// Every kustomization builds offline and every object it yields is well-formed, in one namespace,
// with every reference pointing at something that will exist.

/** Secrets the knative-s3 overlay expects the operator to create (see its kustomization.yaml). */
const OPERATOR_SECRETS: Record<string, string[]> = {
  "infra/base": ["store", "notify-token"],
  "infra/overlays/knative-s3": ["store", "notify-token"],
  "infra/overlays/minio": [],
};

const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"]);

function names(objects: readonly K8sObject[], kind: string): Set<string> {
  return new Set(objects.filter((o) => o.kind === kind).map((o) => o.metadata.name));
}

/** The ConfigMaps, Secrets, ServiceAccounts and claims a pod template refers to. */
function podReferences(o: K8sObject): Array<{ kind: string; name: string; optional: boolean }> {
  const pod = podSpecOf(o);
  if (!pod) return [];
  // Every namespace has a "default" account; a pod may use it only if it mounts no token.
  const refs = [
    {
      kind: "ServiceAccount",
      name: pod.serviceAccountName ?? "default",
      optional: pod.automountServiceAccountToken === false && !pod.serviceAccountName,
    },
  ];
  for (const v of pod.volumes ?? []) {
    if (v.secret) refs.push({ kind: "Secret", name: v.secret.secretName, optional: false });
    if (v.configMap) refs.push({ kind: "ConfigMap", name: v.configMap.name, optional: false });
    if (v.persistentVolumeClaim)
      refs.push({ kind: "PersistentVolumeClaim", name: v.persistentVolumeClaim.claimName, optional: false });
  }
  for (const c of pod.containers) {
    for (const e of c.env ?? []) {
      const s = e.valueFrom?.secretKeyRef;
      const m = e.valueFrom?.configMapKeyRef;
      if (s) refs.push({ kind: "Secret", name: s.name, optional: false });
      if (m) refs.push({ kind: "ConfigMap", name: m.name, optional: Boolean(m.optional) });
    }
    for (const f of c.envFrom ?? []) {
      if (f.secretRef) refs.push({ kind: "Secret", name: f.secretRef.name, optional: Boolean(f.secretRef.optional) });
      if (f.configMapRef)
        refs.push({ kind: "ConfigMap", name: f.configMapRef.name, optional: Boolean(f.configMapRef.optional) });
    }
  }
  return refs;
}

/** Destinations of the eventing objects: sinks, subscribers, dead-letter sinks. */
function destinations(o: K8sObject): Array<{ apiVersion: string; kind: string; name: string }> {
  const spec = (o as { spec?: Record<string, unknown> }).spec ?? {};
  const refs = [
    spec.sink,
    spec.subscriber,
    (spec.delivery as { deadLetterSink?: unknown } | undefined)?.deadLetterSink,
  ];
  return refs.flatMap((d) =>
    (d as { ref?: unknown } | undefined)?.ref
      ? [(d as { ref: { apiVersion: string; kind: string; name: string } }).ref]
      : [],
  );
}

describe.each(KUSTOMIZATIONS)("%s", (dir) => {
  const objects = kustomize(dir);

  it("builds with kubectl kustomize, offline", () => {
    expect(objects.length).toBeGreaterThan(10);
  });

  it("yields objects that validate against the Kubernetes and Knative schemas", async () => {
    for (const o of objects) {
      await expect(validateObject(o), `${o.apiVersion} ${o.kind} ${o.metadata.name}`).resolves.toBeUndefined();
    }
  });

  it("puts every namespaced object in namespace servicelb, each name once per kind", () => {
    const seen = new Set<string>();
    for (const o of objects) {
      if (!CLUSTER_SCOPED.has(o.kind)) expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe("servicelb");
      const key = `${o.apiVersion} ${o.kind} ${o.metadata.name}`;
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
    }
    expect(names(objects, "Namespace")).toEqual(new Set(["servicelb"]));
  });

  it("refers only to objects it creates, or to the Secrets the operator is told to create", () => {
    for (const o of objects) {
      for (const ref of podReferences(o)) {
        const exists =
          names(objects, ref.kind).has(ref.name) ||
          (ref.kind === "Secret" && OPERATOR_SECRETS[dir]!.includes(ref.name));
        expect(exists || ref.optional, `${o.kind} ${o.metadata.name} → ${ref.kind} ${ref.name}`).toBe(true);
      }
      for (const d of destinations(o)) {
        const target = objects.find(
          (x) => x.apiVersion === d.apiVersion && x.kind === d.kind && x.metadata.name === d.name,
        );
        expect(target, `${o.kind} ${o.metadata.name} → ${d.kind} ${d.name}`).toBeDefined();
      }
    }
    const bindings = objects.filter((o) => o.kind === "ClusterRoleBinding") as Array<
      K8sObject & { roleRef: { name: string }; subjects: Array<{ kind: string; name: string; namespace: string }> }
    >;
    for (const b of bindings) {
      expect(names(objects, "ClusterRole").has(b.roleRef.name)).toBe(true);
      for (const s of b.subjects)
        expect(
          names(objects, s.kind).has(s.name) && s.namespace === "servicelb",
          `${b.metadata.name} → ${s.kind} ${s.name}`,
        ).toBe(true);
    }
  });

  it("pins every image by version: a tag other than latest, or a digest", () => {
    for (const o of objects) {
      for (const c of podSpecOf(o)?.containers ?? []) {
        expect(c.image, `${o.kind} ${o.metadata.name}/${c.name}`).toMatch(
          /(@sha256:[0-9a-f]{64}|:(?!latest$)[\w][\w.-]*)$/,
        );
      }
    }
  });

  it("runs the reconcile function on one instance at most", () => {
    const reconcile = objects.find(
      (o) => o.kind === "Service" && o.apiVersion === "serving.knative.dev/v1" && o.metadata.name === "reconcile",
    ) as K8sObject & { spec: { template: { metadata: { annotations: Record<string, string> } } } };
    expect(reconcile.spec.template.metadata.annotations["autoscaling.knative.dev/max-scale"]).toBe("1");
  });

  it("gives every container resource requests, a memory limit and no root", () => {
    for (const o of objects) {
      const pod = podSpecOf(o);
      for (const c of pod?.containers ?? []) {
        const where = `${o.kind} ${o.metadata.name}/${c.name}`;
        expect(c.resources?.requests?.cpu, where).toBeDefined();
        expect(c.resources?.requests?.memory, where).toBeDefined();
        expect(c.resources?.limits?.memory, where).toBeDefined();
        const nonRoot = c.securityContext?.runAsNonRoot ?? pod?.securityContext?.runAsNonRoot;
        expect(nonRoot, where).toBe(true);
        expect(c.securityContext?.allowPrivilegeEscalation, where).toBe(false);
        expect((c.securityContext?.capabilities as { drop?: string[] } | undefined)?.drop, where).toEqual(["ALL"]);
      }
    }
  });
});
