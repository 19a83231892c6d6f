import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

/** Builds the kustomizations under infra/ with kubectl and reads back what would be applied. */

export const REPO = fileURLToPath(new URL("../../", import.meta.url));

export const KUSTOMIZATIONS = ["infra/base", "infra/overlays/knative-s3", "infra/overlays/minio"] as const;
export type Kustomization = (typeof KUSTOMIZATIONS)[number];

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

// Said instead of skipping: a test that cannot build the manifests must not pass.
const KUBECTL_MISSING =
  "kubectl is not on PATH, and test/infra builds every kustomization with `kubectl kustomize` (offline). " +
  "The project's machine image ships it (Debian package kubectl); on another machine install kubectl 1.27 or later. " +
  "Debian's own kubernetes-client (1.20) is too old: its kustomize predates the features infra/ uses.";

const built = new Map<string, K8sObject[]>();

export function kustomize(dir: Kustomization): K8sObject[] {
  const cached = built.get(dir);
  if (cached) return cached;
  let yaml: string;
  try {
    yaml = execFileSync("kubectl", ["kustomize", dir], {
      cwd: REPO,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new Error(KUBECTL_MISSING);
    throw new Error(`kubectl kustomize ${dir} failed:\n${(err as { stderr?: string }).stderr ?? String(err)}`);
  }
  const objects = parseAllDocuments(yaml).map((doc) => doc.toJS() as K8sObject);
  built.set(dir, objects);
  return objects;
}

export function findObject(objects: readonly K8sObject[], kind: string, name: string, group?: string): K8sObject {
  const found = objects.filter(
    (o) => o.kind === kind && o.metadata.name === name && (group === undefined || groupOf(o.apiVersion) === group),
  );
  if (found.length !== 1)
    throw new Error(`expected one ${kind} ${name}${group ? ` (${group})` : ""}, found ${found.length}`);
  return found[0]!;
}

export function groupOf(apiVersion: string): string {
  return apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
}
