import { watch, type FSWatcher, readFileSync } from "node:fs";
import { parseSnapshotText } from "../core/snapshot.js";
import type { Logger } from "../adapters/log.js";
import type { Kind, KubeApiEmulator, KubeObject } from "./kube-api-emulator.js";
import { DemoBackends } from "./demo-backends.js";
import { trace } from "../adapters/trace.js";

const KINDS = new Set<Kind>(["Service", "EndpointSlice", "Endpoints"]);

/** The objects of a cluster file (a List or several documents), keyed by kind/namespace/name. */
function objectsOf(text: string): Map<string, { kind: Kind; obj: KubeObject }> {
  const out = new Map<string, { kind: Kind; obj: KubeObject }>();
  for (const doc of parseSnapshotText(text)) {
    const d = doc as { kind?: string; items?: unknown[] };
    const items = Array.isArray(d.items) ? d.items : [doc];
    for (const item of items as KubeObject[]) {
      const kind = item?.kind as Kind;
      if (!KINDS.has(kind) || !item.metadata?.name) continue;
      const namespace = item.metadata.namespace ?? "default";
      out.set(`${kind}/${namespace}/${item.metadata.name}`, { kind, obj: { ...item, metadata: { ...item.metadata, namespace } } });
    }
  }
  return out;
}

/** Loopback ports the demo's endpoints point at (127.0.0.1 only): each gets a demo backend. */
function loopbackPorts(objects: Iterable<{ kind: Kind; obj: KubeObject }>): number[] {
  const ports = new Set<number>();
  for (const { kind, obj } of objects) {
    if (kind === "EndpointSlice") {
      const eps = (obj.endpoints as Array<{ addresses?: string[] }> | undefined) ?? [];
      if (!eps.some((e) => e.addresses?.includes("127.0.0.1"))) continue;
      for (const p of (obj.ports as Array<{ port?: number }> | undefined) ?? []) if (p.port) ports.add(p.port);
    } else if (kind === "Endpoints") {
      for (const s of (obj.subsets as Array<{ addresses?: Array<{ ip: string }>; ports?: Array<{ port?: number }> }> | undefined) ?? []) {
        if (!s.addresses?.some((a) => a.ip === "127.0.0.1")) continue;
        for (const p of s.ports ?? []) if (p.port) ports.add(p.port);
      }
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * The embedded demo cluster of `npm start`: a cluster file served by the Kubernetes API emulator,
 * re-applied whenever the file changes (a file that does not parse leaves the cluster as it was),
 * and a small HTTP server on every loopback port its endpoints name, so real requests flow.
 */
export class DemoCluster {
  private applied = new Map<string, string>();
  private watcher: FSWatcher | undefined;
  private replaced = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly backends = new Set<number>();
  private readonly processes = new DemoBackends();

  constructor(
    private readonly file: string,
    private readonly api: KubeApiEmulator,
    private readonly log: Logger,
  ) {}

  /** Applies the file to the emulator: changed objects are written, vanished ones deleted. */
  async load(): Promise<{ written: number; removed: number }> {
    const objects = objectsOf(readFileSync(this.file, "utf8"));
    let written = 0;
    let removed = 0;
    for (const [key, { kind, obj }] of objects) {
      const json = JSON.stringify(obj);
      if (this.applied.get(key) === json) continue;
      this.api.upsert(kind, obj);
      this.applied.set(key, json);
      written++;
    }
    for (const key of [...this.applied.keys()]) {
      if (objects.has(key)) continue;
      const [kind, namespace, name] = key.split("/") as [Kind, string, string];
      this.api.remove(kind, namespace, name);
      this.applied.delete(key);
      removed++;
    }
    for (const port of loopbackPorts(objects.values())) await this.startBackend(port);
    return { written, removed };
  }

  watch(): void {
    // Editors replace files as often as they write them. A "change" keeps the watch; a "rename"
    // (the file replaced or moved away) needs a new watch on whatever now has the name.
    this.watcher = watch(this.file, (event) => {
      if (this.timer === undefined) trace("stack", "fs.event");
      if (event === "rename") this.replaced = true;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.timer = undefined;
        trace("stack", "load.start");
        this.load().then(
          ({ written, removed }) => {
            if (written + removed > 0) this.log.info({ file: this.file, written, removed }, "demo cluster changed");
          },
          (err: Error) => this.log.warn({ file: this.file, err: err.message }, "demo cluster file not applied; the cluster keeps its last state"),
        );
        if (this.replaced && this.watcher) {
          this.replaced = false;
          this.watcher.close();
          this.rewatch();
        }
      }, 50);
    });
  }

  /** Watches again; an editor may have the file away for a moment, so a missing file is retried. */
  private rewatch(attempt = 0): void {
    try {
      this.watch();
    } catch (err) {
      if (attempt === 0) this.log.warn({ file: this.file, err: (err as Error).message }, "cannot watch the demo cluster file; retrying");
      this.timer = setTimeout(() => this.rewatch(attempt + 1), Math.min(1000, 50 * 2 ** attempt));
    }
  }

  get backendPorts(): number[] {
    return [...this.backends].sort((a, b) => a - b);
  }

  private async startBackend(port: number): Promise<void> {
    if (this.backends.has(port)) return;
    this.backends.add(port);
    const { error } = await this.processes.start(port);
    if (error) this.log.warn({ port, err: error }, "demo backend port is taken; requests to it reach whatever listens there");
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.watcher?.close();
    await this.processes.stop();
  }
}
