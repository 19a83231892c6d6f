/* Grammars Kubernetes itself enforces on names; reused to validate user input that names objects. */

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const DNS1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** Node names and other dotted names; the 253-character limit is checked separately. */
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** `name` or `namespace/name`; an unqualified name belongs to `defaultNamespace`. */
export function parseServiceRef(ref: string, defaultNamespace: string): { namespace: string; name: string } | null {
  const parts = ref.split("/");
  const [namespace, name] =
    parts.length === 1 ? [defaultNamespace, parts[0]] : parts.length === 2 ? [parts[0], parts[1]] : [];
  if (namespace === undefined || name === undefined) return null;
  if (!DNS1123_LABEL.test(namespace) || !DNS1035_LABEL.test(name)) return null;
  return { namespace, name };
}

/** The label that ties an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";
