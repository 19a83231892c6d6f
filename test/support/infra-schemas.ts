import { knativeContainer, knativeSchemas, knativeVolume } from "./infra-knative.js";
import type { K8sObject } from "./infra-manifests.js";

/**
 * Validates one built object offline: Kubernetes kinds with kubernetes-models (types, required
 * fields, enums; it does not reject unknown fields), Knative kinds with the strict schemas of
 * infra-knative.ts plus kubernetes-models for the pod spec inside a Knative Service.
 */

interface Model {
  validate(): void;
}
type ModelClass = new (data: unknown) => Model;

async function modelClass(apiVersion: string, kind: string): Promise<ModelClass> {
  // kubernetes-models lays its modules out by API version: kubernetes-models/v1, kubernetes-models/apps/v1, ...
  const module = (await import(`kubernetes-models/${apiVersion}`)) as Record<string, ModelClass | undefined>;
  const cls = module[kind];
  if (!cls) throw new Error(`kubernetes-models has no ${kind} in ${apiVersion}`);
  return cls;
}

export async function validateObject(o: K8sObject): Promise<void> {
  const key = `${o.apiVersion}/${o.kind}` as keyof typeof knativeSchemas;
  const schema = knativeSchemas[key];
  if (!schema) {
    new (await modelClass(o.apiVersion, o.kind))(o).validate();
    return;
  }
  schema.parse(o);
  if (key !== "serving.knative.dev/v1/Service") return;
  const {
    containerConcurrency: _c,
    timeoutSeconds: _t,
    ...podSpec
  } = (o as unknown as { spec: { template: { spec: Record<string, unknown> } } }).spec.template.spec;
  for (const c of podSpec.containers as unknown[]) knativeContainer.parse(c);
  for (const v of (podSpec.volumes as unknown[] | undefined) ?? []) knativeVolume.parse(v);
  new (await modelClass("v1", "IoK8sApiCoreV1PodSpec"))(podSpec).validate();
}
