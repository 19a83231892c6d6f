import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { K8sObject } from "./infra-manifests.js";

/**
 * What the containers of the built manifests would see at run time: their environment (values,
 * ConfigMap and Secret references resolved) and the files of their Secret and ConfigMap volumes.
 */

interface KeyRef {
  name: string;
  key: string;
  optional?: boolean;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: KeyRef; configMapKeyRef?: KeyRef; fieldRef?: { fieldPath: string } };
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: Array<{
    configMapRef?: { name: string; optional?: boolean };
    secretRef?: { name: string; optional?: boolean };
  }>;
  ports?: Array<{ name?: string; containerPort: number; hostPort?: number; hostIP?: string; protocol?: string }>;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown>;
}

export interface Volume {
  name: string;
  secret?: { secretName: string; items?: Array<{ key: string; path: string }> };
  configMap?: { name: string; items?: Array<{ key: string; path: string }> };
  emptyDir?: Record<string, unknown>;
  persistentVolumeClaim?: { claimName: string };
}

export interface PodSpec {
  containers: Container[];
  volumes?: Volume[];
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  nodeSelector?: Record<string, string>;
  terminationGracePeriodSeconds?: number;
  securityContext?: Record<string, unknown>;
  tolerations?: Array<{ key?: string; operator?: string; value?: string; effect?: string }>;
  priorityClassName?: string;
}

/** Secrets the operator creates (not in the manifests): name → key → value. */
export type ExternalSecrets = Readonly<Record<string, Readonly<Record<string, string>>>>;

const WITH_POD_TEMPLATE = new Set(["DaemonSet", "Deployment", "StatefulSet", "Job"]);

export function podSpecOf(o: K8sObject): PodSpec | undefined {
  const isKnativeService = o.kind === "Service" && o.apiVersion.startsWith("serving.knative.dev/");
  if (!isKnativeService && !WITH_POD_TEMPLATE.has(o.kind)) return undefined;
  return (o as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
}

export function containerOf(o: K8sObject, name: string): { pod: PodSpec; container: Container } {
  const pod = podSpecOf(o);
  const container = pod?.containers.find((c) => c.name === name);
  if (!pod || !container) throw new Error(`${o.kind} ${o.metadata.name} has no container ${name}`);
  return { pod, container };
}

export class PodView {
  constructor(
    private readonly objects: readonly K8sObject[],
    private readonly external: ExternalSecrets = {},
  ) {}

  /** A key of a ConfigMap or Secret; undefined when absent. Secrets come from the manifests first. */
  private source(kind: "ConfigMap" | "Secret", name: string): Readonly<Record<string, string>> | undefined {
    const o = this.objects.find((x) => x.kind === kind && x.metadata.name === name) as
      | (K8sObject & { data?: Record<string, string>; stringData?: Record<string, string> })
      | undefined;
    if (!o) return kind === "Secret" ? this.external[name] : undefined;
    const data = Object.fromEntries(
      Object.entries(o.data ?? {}).map(([k, v]) => [
        k,
        kind === "Secret" ? Buffer.from(v, "base64").toString("utf8") : v,
      ]),
    );
    return { ...data, ...(o.stringData ?? {}) };
  }

  private ref(kind: "ConfigMap" | "Secret", ref: KeyRef): string | undefined {
    const value = this.source(kind, ref.name)?.[ref.key];
    if (value === undefined && !ref.optional)
      throw new Error(`${kind} ${ref.name} has no key ${ref.key}, and the reference is not optional`);
    return value;
  }

  /**
   * The container's environment. `files` maps each Secret/ConfigMap volume mount onto a directory
   * below `root` (written there), and rewrites variables that point into a mount to match.
   */
  env(
    pod: PodSpec,
    container: Container,
    fieldRefs: Readonly<Record<string, string>> = {},
    root?: string,
  ): Record<string, string> {
    const env: Record<string, string> = {};
    for (const from of container.envFrom ?? []) {
      const ref = from.configMapRef ?? from.secretRef!;
      const data = this.source(from.configMapRef ? "ConfigMap" : "Secret", ref.name);
      if (!data && !ref.optional) throw new Error(`envFrom refers to ${ref.name}, which does not exist`);
      Object.assign(env, data ?? {});
    }
    for (const v of container.env ?? []) {
      const from = v.valueFrom;
      const value =
        v.value ??
        (from?.secretKeyRef
          ? this.ref("Secret", from.secretKeyRef)
          : from?.configMapKeyRef
            ? this.ref("ConfigMap", from.configMapKeyRef)
            : from?.fieldRef
              ? fieldRefs[from.fieldRef.fieldPath]
              : undefined);
      if (value !== undefined) env[v.name] = value;
    }
    if (root === undefined) return env;
    const mounts = this.writeMounts(pod, container, root);
    for (const [name, value] of Object.entries(env)) {
      if (mounts.some((m) => value.startsWith(`${m}/`))) env[name] = join(root, value);
    }
    return env;
  }

  /** Writes the Secret and ConfigMap volumes the container mounts below `root`; returns their mount paths. */
  private writeMounts(pod: PodSpec, container: Container, root: string): string[] {
    const written: string[] = [];
    for (const mount of container.volumeMounts ?? []) {
      const volume = pod.volumes?.find((v) => v.name === mount.name);
      const ref = volume?.secret
        ? { kind: "Secret" as const, name: volume.secret.secretName, items: volume.secret.items }
        : volume?.configMap
          ? { kind: "ConfigMap" as const, ...volume.configMap }
          : undefined;
      if (!ref) continue;
      const data = this.source(ref.kind, ref.name);
      if (!data) throw new Error(`volume ${mount.name} mounts ${ref.kind} ${ref.name}, which does not exist`);
      const files = ref.items ? ref.items.map((i) => [i.path, data[i.key]] as const) : Object.entries(data);
      for (const [path, text] of files) {
        if (text === undefined) throw new Error(`volume ${mount.name}: ${ref.kind} ${ref.name} lacks a listed key`);
        const file = join(root, mount.mountPath, path);
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, text);
      }
      written.push(mount.mountPath);
    }
    return written;
  }
}
