/*
 * The emulator's storage, as etcd keeps it for the API server: one revision counter for every
 * kind, each write a change in revision order, the state at any revision not yet compacted (a
 * list's later pages read the revision of its first; a watch replays the changes after its own),
 * and compaction that forgets history up to now.
 */
import { randomUUID } from "node:crypto";
import { KINDS, type Kind, type KubeObject, objectKey } from "./kinds.js";

export type EventType = "ADDED" | "MODIFIED" | "DELETED";

/** One write, in revision order; `prev` lets a selector-filtered watch turn label changes into ADDED/DELETED. */
export interface Change {
  rv: number;
  type: EventType;
  kind: Kind;
  key: string;
  object: KubeObject;
  prev: KubeObject | undefined;
}

export class Revisions {
  private rv: number;
  /** State at `baseRv`; `history` holds every change after it. Compaction moves the base forward. */
  private base = new Map<Kind, Map<string, KubeObject>>();
  private baseRv: number;
  private history: Change[] = [];
  private current = new Map<Kind, Map<string, KubeObject>>();
  /**
   * The objects of one kind at one revision, sorted by key: what every page of a list reads. Built
   * once per (kind, revision) and kept for the few revisions whose lists may still be paging, so
   * that a list of N objects in pages of L costs one sort, not N/L copies, replays and sorts.
   */
  private sortedCache = new Map<string, Array<[string, KubeObject]>>();

  /** `onChange` sees every write once it is stored: the watches and the stage trace. */
  constructor(
    resourceVersion: number,
    private readonly onChange: (change: Change) => void,
  ) {
    this.rv = this.baseRv = resourceVersion;
    for (const kind of Object.keys(KINDS) as Kind[]) {
      this.base.set(kind, new Map());
      this.current.set(kind, new Map());
    }
  }

  /** The current revision: the resourceVersion a list started now would carry. */
  get revision(): number {
    return this.rv;
  }

  /** The oldest revision still known: a watch or list from before it answers 410. */
  get compactedAt(): number {
    return this.baseRv;
  }

  /** Create or replace an object; it gets the next resourceVersion. Returns the stored object (not a copy). */
  upsert(kind: Kind, obj: KubeObject): KubeObject {
    const info = KINDS[kind];
    const namespace = info.cluster ? undefined : (obj.metadata.namespace ?? "default");
    const key = objectKey(kind, namespace, obj.metadata.name);
    const prev = this.current.get(kind)!.get(key);
    const rv = ++this.rv;
    const { namespace: _namespace, ...given } = obj.metadata;
    const stored: KubeObject = structuredClone({
      ...obj,
      apiVersion: info.apiVersion,
      kind,
      metadata: {
        ...given,
        ...(namespace !== undefined ? { namespace } : {}),
        uid: prev?.metadata.uid ?? obj.metadata.uid ?? randomUUID(),
        creationTimestamp: prev?.metadata.creationTimestamp ?? obj.metadata.creationTimestamp ?? rfc3339(new Date()),
        ...(info.status ? { generation: nextGeneration(prev, obj) } : {}),
        resourceVersion: String(rv),
      },
    });
    this.record({ rv, type: prev ? "MODIFIED" : "ADDED", kind, key, object: stored, prev });
    return stored;
  }

  /** The object as stored now (not a copy), or undefined. */
  stored(kind: Kind, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.current.get(kind)!.get(objectKey(kind, namespace, name));
  }

  /** Every object of a kind as stored now. */
  objects(kind: Kind): Iterable<KubeObject> {
    return this.current.get(kind)!.values();
  }

  /** Delete an object; returns false when it did not exist. */
  remove(kind: Kind, namespace: string | undefined, name: string): boolean {
    const key = objectKey(kind, namespace, name);
    const prev = this.current.get(kind)!.get(key);
    if (!prev) return false;
    const rv = ++this.rv;
    // A DELETED event carries the object as last seen, stamped with the deletion's revision.
    const object = { ...prev, metadata: { ...prev.metadata, resourceVersion: String(rv) } };
    this.record({ rv, type: "DELETED", kind, key, object, prev });
    return true;
  }

  /** Forget history up to now, like etcd compaction. */
  compact(): void {
    this.sortedCache.clear();
    this.base = new Map([...this.current].map(([kind, objects]) => [kind, new Map(objects)]));
    this.baseRv = this.rv;
    this.history = [];
  }

  /** The changes of one kind after `rv`, in order: what a watch from `rv` replays. */
  changesAfter(kind: Kind, rv: number): Change[] {
    return this.history.filter((change) => change.rv > rv && change.kind === kind);
  }

  /** The objects of a kind at revision `rv` (not compacted), sorted by key. */
  sortedAt(kind: Kind, rv: number): Array<[string, KubeObject]> {
    const id = `${kind}@${rv}`;
    let sorted = this.sortedCache.get(id);
    if (!sorted) {
      const state = rv === this.rv ? this.current.get(kind)! : this.stateAt(kind, rv);
      sorted = [...state].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      // A list pages through one revision; a few recent revisions cover lists in flight side by side.
      if (this.sortedCache.size >= 8) this.sortedCache.delete(this.sortedCache.keys().next().value!);
      this.sortedCache.set(id, sorted);
    }
    return sorted;
  }

  private stateAt(kind: Kind, rv: number): Map<string, KubeObject> {
    const state = new Map(this.base.get(kind));
    for (const change of this.history) {
      if (change.rv > rv) break;
      if (change.kind !== kind) continue;
      if (change.type === "DELETED") state.delete(change.key);
      else state.set(change.key, change.object);
    }
    return state;
  }

  private record(change: Change): void {
    this.history.push(change);
    const objects = this.current.get(change.kind)!;
    if (change.type === "DELETED") objects.delete(change.key);
    else objects.set(change.key, change.object);
    this.onChange(change);
  }
}

/** metadata.generation as the API server keeps it for kinds with a status subresource: +1 per change of spec. */
function nextGeneration(prev: KubeObject | undefined, obj: KubeObject): number {
  const before = prev?.metadata.generation;
  if (prev === undefined || typeof before !== "number")
    return typeof obj.metadata.generation === "number" ? obj.metadata.generation : 1;
  return JSON.stringify(prev.spec) === JSON.stringify(obj.spec) ? before : before + 1;
}

function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}
