/*
 * A cluster snapshot: the Services and endpoints servicelb reads (snapshot-schemas.ts), from
 * documents in Kubernetes' own JSON or YAML shape, exactly as `kubectl get
 * services,endpointslices -A -o json` prints them. Items are validated one by one so that one
 * malformed object is reported and skipped instead of failing the whole render.
 */

import { parseAllDocuments } from "yaml";
import { compareRevisions, decimalRevision } from "../publish/revision.js";
import { entryOf } from "../render/map-entry.js";
import { SweptMap } from "../model/swept-map.js";
import {
  emptyGatewayObjects,
  type GatewayObjects,
  gatewayClassSchema,
  gatewaySchema,
  httpRouteSchema,
  type Namespace,
  namespaceSchema,
  referenceGrantSchema,
} from "../gateway/schemas.js";
import { errorMessage } from "../error-message.js";
import {
  type EndpointSlice,
  type Endpoints,
  endpointSliceSchema,
  endpointsSchema,
  type Service,
  serviceSchema,
} from "./snapshot-schemas.js";

// The kinds a Snapshot holds, for its readers (core/gateway/ reads Services from here).
export type { EndpointSlice, Endpoints, Service } from "./snapshot-schemas.js";

export interface Snapshot {
  services: Service[];
  endpointSlices: EndpointSlice[];
  endpoints: Endpoints[];
  /** Highest resourceVersion seen (list or item), as a decimal string; "0" when none is numeric. */
  revision: string;
  /** Items that were not understood; reported, never fatal. */
  problems: string[];
  /** Set by a live list: every resourceVersion is the API server's, so unchanged ones mean unchanged objects. */
  trustedRevisions?: boolean;
  /** Gateway API objects (core/gateway/); absent when the snapshot holds none. */
  gateway?: GatewayObjects;
}

export class SnapshotError extends Error {
  override name = "SnapshotError";
}

/** The Gateway API kinds a snapshot keeps, and the schema of each; Namespace only for their selectors. */
const GATEWAY_SCHEMAS = {
  GatewayClass: gatewayClassSchema,
  Gateway: gatewaySchema,
  HTTPRoute: httpRouteSchema,
  ReferenceGrant: referenceGrantSchema,
  Namespace: namespaceSchema,
} as const;
type GatewayKind = keyof typeof GATEWAY_SCHEMAS;
const GATEWAY_LISTS: Record<GatewayKind, keyof GatewayObjects> = {
  GatewayClass: "gatewayClasses",
  Gateway: "gateways",
  HTTPRoute: "httpRoutes",
  ReferenceGrant: "referenceGrants",
  Namespace: "namespaces",
};
const isGatewayKind = (kind: string | undefined): kind is GatewayKind =>
  kind !== undefined && Object.hasOwn(GATEWAY_SCHEMAS, kind);

const ITEM_KINDS: Record<string, string> = {
  ServiceList: "Service",
  EndpointSliceList: "EndpointSlice",
  EndpointsList: "Endpoints",
  GatewayClassList: "GatewayClass",
  GatewayList: "Gateway",
  HTTPRouteList: "HTTPRoute",
  ReferenceGrantList: "ReferenceGrant",
  NamespaceList: "Namespace",
};
const LIST_KINDS = new Set(["List", ...Object.keys(ITEM_KINDS)]);

/** Parses JSON or YAML text (one or more documents) into documents, with a clear error on bad syntax. */
export function parseSnapshotText(text: string): unknown[] {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return [JSON.parse(text)];
    } catch (err) {
      throw new SnapshotError(`snapshot is not valid JSON: ${errorMessage(err)}`);
    }
  }
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const out: unknown[] = [];
  for (const doc of list) {
    if (doc.errors.length > 0) throw new SnapshotError(`snapshot is not valid YAML: ${doc.errors[0]!.message}`);
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      // e.g. an alias bomb: the yaml package refuses it by throwing.
      throw new SnapshotError(`snapshot is not usable YAML: ${errorMessage(err)}`);
    }
    if (value !== null && value !== undefined) out.push(value);
  }
  if (out.length === 0) throw new SnapshotError("snapshot is empty: expected a Kubernetes List");
  return out;
}

type GatewayItem = GatewayObjects[keyof GatewayObjects][number];
type Item = Service | EndpointSlice | Endpoints | GatewayItem;
interface ParsedItem {
  resourceVersion: string;
  item: Item;
}

/**
 * Validated items of a warm instance's earlier live lists, by kind, namespace, name and
 * resourceVersion. The API server gives every write a new resourceVersion, so an item listed
 * again with the same one is the same object and need not be validated again: at 10,000 Services
 * validation is most of the list stage. Only for live lists; a file's resourceVersions prove
 * nothing. Items a list no longer returns are forgotten at the end of it. Lists that overlap
 * (concurrent dry runs) only make it forget more: an item is reused only for the very
 * resourceVersion it was validated at.
 */
export class ParsedItems {
  private readonly byKind = new Map<string, SweptMap<ParsedItem>>();

  begin(): void {
    for (const items of this.byKind.values()) items.begin();
  }

  take(kind: string, namespace: string, name: string, resourceVersion: string): Item | undefined {
    const items = this.byKind.get(kind);
    const entry = items?.get(namespace, name);
    if (entry?.resourceVersion !== resourceVersion) return undefined;
    items!.touch(namespace, name);
    return entry.item;
  }

  put(kind: string, namespace: string, name: string, resourceVersion: string, item: Item): void {
    entryOf(this.byKind, kind, () => new SweptMap<ParsedItem>()).set(namespace, name, { resourceVersion, item });
  }

  end(): void {
    for (const items of this.byKind.values()) items.sweep();
  }
}

/** The higher of a decimal revision so far and a resourceVersion; one that is not decimal is passed over. */
function higherRevision(so: string, value: unknown): string {
  const digits = decimalRevision(value);
  return digits !== null && compareRevisions(digits, so) > 0 ? digits : so;
}

/** One item as a snapshot keeps it, or why it was not understood; null for kinds of no concern. */
export type ValidatedItem =
  | { kind: "Service"; item: Service; resourceVersion: unknown }
  | { kind: "EndpointSlice"; item: EndpointSlice; resourceVersion: unknown }
  | { kind: "Endpoints"; item: Endpoints; resourceVersion: unknown }
  | { kind: GatewayKind; item: GatewayItem; resourceVersion: unknown }
  | { kind: "problem"; problem: string }
  | null;

/**
 * Validates one item (of a list, or a single object). `kindHint` names the kind of a typed list's
 * items, which carry none; `reuse` is for live lists only (see ParsedItems).
 */
export function validateItem(
  item: unknown,
  kindHint: string | undefined,
  where: string,
  reuse?: ParsedItems,
): ValidatedItem {
  if (typeof item !== "object" || item === null) return { kind: "problem", problem: `${where}: not an object` };
  const rec = item as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown; resourceVersion?: unknown } };
  const kind = typeof rec.kind === "string" ? rec.kind : kindHint;
  const schema =
    kind === "Service"
      ? serviceSchema
      : kind === "EndpointSlice"
        ? endpointSliceSchema
        : kind === "Endpoints"
          ? endpointsSchema
          : isGatewayKind(kind)
            ? GATEWAY_SCHEMAS[kind]
            : undefined;
  // Other kinds in a mixed `kubectl get` are legitimate; they just do not concern us.
  if (!schema) return null;
  const { name, namespace, resourceVersion } = rec.metadata ?? {};
  const key =
    reuse && typeof name === "string" && typeof namespace === "string" && typeof resourceVersion === "string"
      ? ([kind!, namespace, name, resourceVersion] as const)
      : undefined;
  let data = key ? reuse!.take(...key) : undefined;
  if (data === undefined) {
    const parsed = schema.safeParse(item);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const id = `${kind} ${String(namespace ?? "default")}/${String(name ?? "?")}`;
      return { kind: "problem", problem: `${where} (${id}): ${issue.path.join(".") || "item"}: ${issue.message}` };
    }
    data = parsed.data as Item;
    if (key) reuse!.put(...key, data);
  }
  return { kind, item: data, resourceVersion } as ValidatedItem;
}

/** A Snapshot of validated items; its revision is the highest of theirs and the lists'. */
export function snapshotFromItems(items: readonly ValidatedItem[], listRevisions: readonly unknown[]): Snapshot {
  const snap: Snapshot = { services: [], endpointSlices: [], endpoints: [], revision: "0", problems: [] };
  let revision = "0";
  for (const rv of listRevisions) revision = higherRevision(revision, rv);
  // The API server holds one object per kind, namespace and name; a second one (a hand-made file)
  // would render a second backend of the same name, which HAProxy refuses.
  const names = new Set<string>();
  const namespaces: Namespace[] = [];
  for (const v of items) {
    if (v === null) continue;
    if (v.kind === "problem") {
      snap.problems.push(v.problem);
      continue;
    }
    const { namespace, name } = v.item.metadata;
    const key = `${v.kind} ${namespace}/${name}`;
    if (names.has(key)) {
      snap.problems.push(
        `${key}: Duplicate value: an object of this kind, namespace and name came earlier; this one is ignored`,
      );
      continue;
    }
    names.add(key);
    revision = higherRevision(revision, v.resourceVersion);
    if (v.kind === "Service") snap.services.push(v.item);
    else if (v.kind === "EndpointSlice") snap.endpointSlices.push(v.item);
    else if (v.kind === "Endpoints") snap.endpoints.push(v.item);
    else if (v.kind === "Namespace") namespaces.push(v.item as Namespace);
    else {
      snap.gateway ??= emptyGatewayObjects();
      (snap.gateway[GATEWAY_LISTS[v.kind]] as GatewayItem[]).push(v.item);
    }
  }
  // Namespaces matter only to Gateway listeners: a snapshot without Gateway API objects stays as it was.
  if (snap.gateway) snap.gateway.namespaces = namespaces;
  snap.revision = revision;
  return snap;
}

/**
 * Builds a Snapshot from parsed documents: Lists (List, ServiceList, …) or single objects.
 * `reuse` is for live lists only (see ParsedItems).
 */
export function snapshotFromDocuments(docs: unknown[], reuse?: ParsedItems): Snapshot {
  const items: ValidatedItem[] = [];
  const listRevisions: unknown[] = [];
  reuse?.begin();
  docs.forEach((doc, d) => {
    if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
      throw new SnapshotError(`document ${d + 1} is not a Kubernetes object: expected kind List with items`);
    }
    const obj = doc as { kind?: unknown; items?: unknown; metadata?: { resourceVersion?: unknown } };
    if (typeof obj.kind === "string" && LIST_KINDS.has(obj.kind)) {
      if (!Array.isArray(obj.items)) throw new SnapshotError(`document ${d + 1} (${obj.kind}) has no items array`);
      listRevisions.push(obj.metadata?.resourceVersion);
      for (const [i, item] of obj.items.entries()) {
        items.push(validateItem(item, ITEM_KINDS[obj.kind as string], `items[${i}]`, reuse));
      }
    } else if (
      obj.kind === "Service" ||
      obj.kind === "EndpointSlice" ||
      obj.kind === "Endpoints" ||
      (typeof obj.kind === "string" && isGatewayKind(obj.kind))
    ) {
      items.push(validateItem(obj, undefined, `document ${d + 1}`, reuse));
    } else {
      throw new SnapshotError(
        `document ${d + 1} has kind ${JSON.stringify(obj.kind ?? null)}: expected a List, ServiceList, EndpointSliceList, EndpointsList, Service, EndpointSlice or Endpoints, or a Gateway API kind (GatewayClass, Gateway, HTTPRoute, ReferenceGrant)`,
      );
    }
  });
  reuse?.end();
  return snapshotFromItems(items, listRevisions);
}

export function parseSnapshot(text: string): Snapshot {
  return snapshotFromDocuments(parseSnapshotText(text));
}
