import { isIP } from "node:net";
import type { Snapshot } from "./snapshot.js";
import type { EndpointSlice, Endpoints, Service } from "./snapshot-schemas.js";
import { SERVICE_NAME_LABEL } from "./k8s-names.js";
import { entryOf } from "../render/map-entry.js";

type ServicePort = Service["spec"]["ports"][number];

/** `ip:port` for HAProxy, or null for an unusable address (0.0.0.0 would mean "the client's destination"). */
export function formatAddress(ip: string, port: number): string | null {
  if (ip === "0.0.0.0" || ip === "::" || /^0+(\.0+){3}$/.test(ip)) return null;
  const family = isIP(ip);
  if (family === 4) return `${ip}:${port}`;
  if (family === 6) return `[${ip}]:${port}`;
  return null;
}

/** The objects holding a Service's endpoints: its EndpointSlices when it has any, else its v1 Endpoints. */
export type EndpointSource = readonly EndpointSlice[] | Endpoints | undefined;

/**
 * Endpoint lookup by Service. Keyed by namespace, then name: no key strings are built, which
 * matters on a warm instance that looks up 10,000 Services per render.
 */
export class EndpointIndex {
  private readonly slices = new Map<string, Map<string, EndpointSlice[]>>();
  private readonly endpoints = new Map<string, Map<string, Endpoints>>();

  constructor(snapshot: Pick<Snapshot, "endpointSlices" | "endpoints">) {
    for (const slice of snapshot.endpointSlices) {
      const owner = slice.metadata.labels[SERVICE_NAME_LABEL];
      if (owner) this.addSlice(slice, owner);
    }
    for (const ep of snapshot.endpoints) this.addEndpoints(ep);
  }

  /**
   * Puts `now` where `before` was (the same object in a later list, changed), so a warm instance
   * keeps its index across lists. Returns the Services whose endpoints these are, before and now,
   * as [namespace, name]. The order of a Service's slices may then differ from a fresh index's,
   * which changes nothing: addresses are sorted.
   */
  replaceSlice(before: EndpointSlice, now: EndpointSlice): Array<[string, string]> {
    const owners: Array<[string, string]> = [];
    const was = before.metadata.labels[SERVICE_NAME_LABEL];
    const is = now.metadata.labels[SERVICE_NAME_LABEL];
    const namespace = before.metadata.namespace;
    const inNamespace = this.slices.get(namespace);
    const list = was ? inNamespace?.get(was) : undefined;
    const at = list ? list.indexOf(before) : -1;
    if (list && at >= 0) {
      if (is === was && now.metadata.namespace === namespace) {
        list[at] = now;
        return [[namespace, was!]];
      }
      list.splice(at, 1);
      if (list.length === 0) inNamespace!.delete(was!);
      if (inNamespace!.size === 0) this.slices.delete(namespace);
      owners.push([namespace, was!]);
    }
    if (is) {
      this.addSlice(now, is);
      owners.push([now.metadata.namespace, is]);
    }
    return owners;
  }

  /** As replaceSlice, for v1 Endpoints. */
  replaceEndpoints(before: Endpoints, now: Endpoints): Array<[string, string]> {
    const { namespace, name } = before.metadata;
    const inNamespace = this.endpoints.get(namespace);
    if (inNamespace?.get(name) === before) {
      inNamespace.delete(name);
      if (inNamespace.size === 0) this.endpoints.delete(namespace);
    }
    this.addEndpoints(now);
    return [
      [namespace, name],
      [now.metadata.namespace, now.metadata.name],
    ];
  }

  private addSlice(slice: EndpointSlice, owner: string): void {
    entryOf(
      entryOf(this.slices, slice.metadata.namespace, () => new Map()),
      owner,
      () => [],
    ).push(slice);
  }

  private addEndpoints(ep: Endpoints): void {
    entryOf(this.endpoints, ep.metadata.namespace, () => new Map()).set(ep.metadata.name, ep);
  }

  sourceOf(service: Service): EndpointSource {
    const { namespace, name } = service.metadata;
    return this.slices.get(namespace)?.get(name) ?? this.endpoints.get(namespace)?.get(name);
  }

  /**
   * Ready endpoints of one Service port, as sorted unique `ip:port` strings. Endpoint ports carry
   * the *Service port's* name, and their number is the resolved target port of each pod: matching
   * on that name is what makes named targetPorts work (the original matched the targetPort name).
   */
  addresses(service: Service, port: ServicePort): string[] {
    const out = new Set<string>();
    const source = this.sourceOf(service);
    if (Array.isArray(source)) {
      for (const slice of source as EndpointSlice[]) {
        if (slice.addressType !== "IPv4" && slice.addressType !== "IPv6") continue;
        const p = slice.ports.find((sp) => sp.name === port.name && sp.protocol === port.protocol);
        if (!p?.port) continue;
        for (const ip of slice.readyAddresses) {
          const address = formatAddress(ip, p.port);
          if (address) out.add(address);
        }
      }
    } else {
      for (const subset of (source as Endpoints | undefined)?.subsets ?? []) {
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
