/*
 * Where servicelb's Kubernetes credentials come from: the kubeconfig named, $KUBECONFIG,
 * ~/.kube/config, or a pod's service account, as client-go's loading rules find them; read again
 * when a file changes (a rotated token or certificate).
 */

import { existsSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node/dist/config.js";
import { OptionsError } from "../core/settings/settings.js";
import { ClusterError } from "./cluster-error.js";

/**
 * Nothing to read a cluster from. An OptionsError, whose message is the CLI's advice; a server
 * (the HTTP dry run) says instead what it needs, from `looked`.
 */
export class NoKubeconfigError extends OptionsError {
  constructor(readonly looked: string) {
    super(
      `no kubeconfig found (looked in ${looked}): pass --kubeconfig FILE, or --snapshot FILE to render without a cluster`,
    );
  }
}

/**
 * In a pod (KUBERNETES_SERVICE_HOST set) with no kubeconfig given, the service account; else the
 * given file; else $KUBECONFIG or ~/.kube/config. An explicit $KUBECONFIG wins over in-cluster
 * config, as in client-go's loading rules.
 */
export function loadKubeConfig(options: { kubeconfig?: string; context?: string } = {}): KubeConfig {
  const { KUBECONFIG, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT } = process.env;
  const id = JSON.stringify([
    options.kubeconfig,
    options.context,
    KUBECONFIG,
    KUBERNETES_SERVICE_HOST,
    KUBERNETES_SERVICE_PORT,
  ]);
  const files = options.kubeconfig
    ? [options.kubeconfig]
    : !KUBECONFIG && KUBERNETES_SERVICE_HOST
      ? []
      : KUBECONFIG
        ? KUBECONFIG.split(delimiter)
        : [join(homedir(), ".kube", "config")];
  const stamp = files.map(fileStamp).join(";");
  const known = kubeConfigs.get(id);
  if (known?.stamp === stamp) return known.kc;
  const kc = readKubeConfig(options);
  kubeConfigs.set(id, { stamp, kc });
  return kc;
}

/**
 * Kubeconfigs as last read, while the files they came from are unchanged: a warm instance reads
 * and parses its kubeconfig once, not for every request (a head start sends two). A file
 * rewritten (a rotated credential, a new version of a mounted secret) is read again at the next
 * request. In a pod, client-node reads the service account's token file itself as it rotates.
 */
const kubeConfigs = new Map<string, { stamp: string; kc: KubeConfig }>();

function fileStamp(path: string): string {
  try {
    const st = statSync(path);
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return "absent";
  }
}

function readKubeConfig(options: { kubeconfig?: string; context?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfig) {
    if (!existsSync(options.kubeconfig))
      throw new OptionsError(`--kubeconfig / SERVICELB_KUBECONFIG: ${options.kubeconfig} does not exist`);
    kc.loadFromFile(options.kubeconfig);
  } else if (!process.env.KUBECONFIG && process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
  else {
    // With nothing to load, client-node falls back to http://localhost:8080 and then fails with
    // an unrelated TLS message; say what was looked for instead.
    const home = join(homedir(), ".kube", "config");
    if (!process.env.KUBECONFIG && !existsSync(home)) {
      throw new NoKubeconfigError(`$KUBECONFIG, ${home} and for an in-cluster service account`);
    }
    kc.loadFromDefault();
  }
  if (options.context !== undefined) {
    if (!kc.getContextObject(options.context)) {
      const known =
        kc
          .getContexts()
          .map((c) => `"${c.name}"`)
          .join(", ") || "none";
      throw new ClusterError(
        "not-found",
        `kubeconfig context "${options.context}" does not exist (known contexts: ${known})`,
        { transient: false },
      );
    }
    kc.setCurrentContext(options.context);
  }
  return kc;
}
