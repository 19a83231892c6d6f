import { isIP } from "node:net";
import type { EndpointSlice, Endpoints, Service, Snapshot } from "./snapshot.js";

type ServicePort = Service["spec"]["ports"][number];

const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

/** `ip:port` for HAProxy, or null for an unusable address (0.0.0.0 would mean "the client's destination"). */
export function formatAddress(ip: string, port: number): string | null {
  if (ip === "0.0.0.0" || ip === "::" || /^0+(\.0+){3}$/.test(ip)) return null;
  const family = isIP(ip);
  if (family === 4) return `${ip}:${port}`;
  if (family === 6) return `[${ip}]:${port}`;
  return null;
}

/** Endpoint lookup by Service: EndpointSlices when a Service has any, else its v1 Endpoints. */
export class EndpointIndex {
  private readonly slices = new Map<string, EndpointSlice[]>();
  private readonly endpoints = new Map<string, Endpoints>();

  constructor(snapshot: Pick<Snapshot, "endpointSlices" | "endpoints">) {
    for (const slice of snapshot.endpointSlices) {
      const owner = slice.metadata.labels[SERVICE_NAME_LABEL];
      if (!owner) continue;
      const key = `${slice.metadata.namespace}/${owner}`;
      const list = this.slices.get(key);
      if (list) list.push(slice);
      else this.slices.set(key, [slice]);
    }
    for (const ep of snapshot.endpoints) this.endpoints.set(`${ep.metadata.namespace}/${ep.metadata.name}`, ep);
  }

  /**
   * The resourceVersions of the objects that hold a Service's endpoints (slices, else its
   * Endpoints), or null when one has none: a cache may only trust versions it can see.
   */
  revisions(service: Service): string | null {
    const key = `${service.metadata.namespace}/${service.metadata.name}`;
    const slices = this.slices.get(key);
    if (slices) {
      const parts: string[] = [];
      for (const s of slices) {
        if (!s.metadata.resourceVersion) return null;
        parts.push(`${s.metadata.name}@${s.metadata.resourceVersion}`);
      }
      return parts.sort().join(",");
    }
    const ep = this.endpoints.get(key);
    if (!ep) return "";
    return ep.metadata.resourceVersion ? `endpoints@${ep.metadata.resourceVersion}` : null;
  }

  /**
   * Ready endpoints of one Service port, as sorted unique `ip:port` strings. Endpoint ports carry
   * the *Service port's* name, and their number is the resolved target port of each pod: matching
   * on that name is what makes named targetPorts work (the original matched the targetPort name).
   */
  addresses(service: Service, port: ServicePort): string[] {
    const key = `${service.metadata.namespace}/${service.metadata.name}`;
    const out = new Set<string>();
    const slices = this.slices.get(key);
    if (slices) {
      for (const slice of slices) {
        if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") continue;
        const p = slice.ports.find((sp) => sp.name === port.name && sp.protocol === port.protocol);
        if (!p?.port) continue;
        for (const ep of slice.endpoints) {
          // A nil ready condition means ready (discovery.k8s.io/v1 API contract).
          if (ep.conditions?.ready === false) continue;
          const ip = ep.addresses[0];
          const address = ip === undefined ? null : formatAddress(ip, p.port);
          if (address) out.add(address);
        }
      }
    } else {
      for (const subset of this.endpoints.get(key)?.subsets ?? []) {
        const p = subset.ports.find((sp) => sp.name === port.name && sp.protocol === port.protocol);
        if (!p?.port) continue;
        for (const a of subset.addresses) {
          const address = formatAddress(a.ip, p.port);
          if (address) out.add(address);
        }
      }
    }
    return [...out].sort();
  }
}
