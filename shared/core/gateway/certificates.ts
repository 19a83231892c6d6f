/*
 * An HTTPS listener's certificates (docs/gateway-api.md#certificates). Private keys never pass
 * through the function or the store: a certificateRef (a core Secret, `namespace/name`) names a
 * PEM file that each node holds in its own directory (the agent's --gateway-cert-dir, as
 * `<namespace>/<name>.pem`), and the agents report which of them they hold and that parse. A
 * listener is bound with the certificates every reporting node holds: HAProxy refuses a config
 * whose `crt` file is missing, so a certificate one node lacks would stop that node from taking
 * any config. Pure: what the nodes hold is the caller's to tell.
 */

import { GATEWAY_CERT_DIR_VARIABLE } from "../haproxy-config/environment.js";
import { DNS1123_LABEL, DNS1123_SUBDOMAIN } from "../kubernetes/k8s-names.js";
import { OptionsError } from "../settings/settings.js";
import { GATEWAY_GROUP, type CertificateRef, type Gateway, type Listener, type ReferenceGrant } from "./schemas.js";

/** What the reporting nodes hold: per node, the refs (`namespace/name`) of its certificate files that parse. */
export interface HeldCertificates {
  /**
   * Each reporting node, `name` as messages call it ("node a"); `certificates` null when it has no
   * --gateway-cert-dir.
   */
  holders: ReadonlyArray<{ name: string; certificates: readonly string[] | null }>;
  /** Why nothing is known when there is no holder, for messages. */
  unknown: string;
}

export type CertificateProblem = { reason: "InvalidCertificateRef" | "RefNotPermitted"; message: string };

export interface ListenerCertificates {
  /** The refs to bind, in the listener's order: every reporting node holds each. */
  usable: string[];
  /** Why a ref is not bound: the first problem gives the listener's ResolvedRefs its reason. */
  problems: CertificateProblem[];
}

/** The path of a certificate file on a node, as the config names it: HAProxy expands the variable the agent sets. */
export function certificatePath(ref: string): string {
  return `"\${${GATEWAY_CERT_DIR_VARIABLE}}/${ref}.pem"`;
}

/** Whether a ReferenceGrant in the Secret's namespace lets Gateways of `fromNamespace` refer to it. */
function secretGranted(grants: readonly ReferenceGrant[], fromNamespace: string, toNamespace: string, name: string) {
  return grants.some(
    (g) =>
      g.metadata.namespace === toNamespace &&
      g.spec.from.some((f) => f.group === GATEWAY_GROUP && f.kind === "Gateway" && f.namespace === fromNamespace) &&
      g.spec.to.some((t) => t.group === "" && t.kind === "Secret" && (t.name === null || t.name === name)),
  );
}

/** Who lacks `ref` (or that nothing is known); null when every holder holds it. */
function lacking(held: HeldCertificates, ref: string): string | null {
  if (held.holders.length === 0) return held.unknown;
  const without = held.holders.filter((n) => !n.certificates?.includes(ref));
  if (without.length === 0) return null;
  const shown = without
    .slice(0, 3)
    .map((n) => (n.certificates === null ? `${n.name} (no --gateway-cert-dir)` : n.name));
  const more = without.length > shown.length ? ` and ${without.length - shown.length} more` : "";
  const share = held.holders.length > 1 ? ` (${without.length} of ${held.holders.length})` : "";
  return `not held by ${shown.join(", ")}${more}${share}`;
}

function refProblem(
  gateway: Gateway,
  ref: CertificateRef,
  grants: readonly ReferenceGrant[],
  held: HeldCertificates,
): { ref: string } | CertificateProblem {
  const namespace = ref.namespace ?? gateway.metadata.namespace;
  const id = `${namespace}/${ref.name}`;
  if (ref.group !== "" || ref.kind !== "Secret")
    return {
      reason: "InvalidCertificateRef",
      message: `certificateRef ${ref.name}: kind ${ref.group ? `${ref.kind}.${ref.group}` : ref.kind} is not supported (Secret only)`,
    };
  // The grant is checked first, whether the file exists or not: the spec's order.
  if (
    namespace !== gateway.metadata.namespace &&
    !secretGranted(grants, gateway.metadata.namespace, namespace, ref.name)
  )
    return {
      reason: "RefNotPermitted",
      message: `certificateRef ${id}: no ReferenceGrant in namespace ${namespace} lets Gateways of ${gateway.metadata.namespace} refer to Secret ${ref.name}`,
    };
  const why = lacking(held, id);
  return why === null
    ? { ref: id }
    : { reason: "InvalidCertificateRef", message: `certificate ${id} (${id}.pem): ${why}` };
}

/** The certificates of an HTTPS listener (tls mode Terminate) that can be bound, and why the others cannot. */
export function listenerCertificates(
  gateway: Gateway,
  listener: Listener,
  grants: readonly ReferenceGrant[],
  held: HeldCertificates,
): ListenerCertificates {
  const refs = listener.tls?.certificateRefs ?? [];
  if (refs.length === 0)
    return {
      usable: [],
      problems: [{ reason: "InvalidCertificateRef", message: "an HTTPS listener needs tls.certificateRefs" }],
    };
  const usable: string[] = [];
  const problems: CertificateProblem[] = [];
  for (const ref of refs) {
    const r = refProblem(gateway, ref, grants, held);
    if ("ref" in r) {
      if (!usable.includes(r.ref)) usable.push(r.ref);
    } else problems.push(r);
  }
  return { usable, problems };
}

/**
 * What the dry run (`servicelb render --gateway-certs`) takes every node to hold: the refs listed,
 * comma-separated `namespace/name`. Without the flag it holds none, and says how to name them.
 */
export function assumedCertificates(list: string | undefined): HeldCertificates {
  if (list === undefined)
    return {
      holders: [],
      unknown: "the dry run binds only the certificates --gateway-certs names (namespace/name, comma-separated)",
    };
  const refs = list
    .split(",")
    .map((r) => r.trim())
    .filter((r) => r !== "");
  for (const ref of refs) {
    const [namespace, name, extra] = ref.split("/");
    if (extra !== undefined || !namespace || !name || !DNS1123_LABEL.test(namespace) || !DNS1123_SUBDOMAIN.test(name))
      throw new OptionsError(`--gateway-certs: ${JSON.stringify(ref)} is not a certificateRef as namespace/name`);
  }
  return { holders: [{ name: "--gateway-certs", certificates: refs }], unknown: "" };
}
