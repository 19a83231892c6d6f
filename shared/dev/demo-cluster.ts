import { watch, type FSWatcher, readFileSync } from "node:fs";
import { parseSnapshotText } from "../core/snapshot.js";
import type { Logger } from "../adapters/log.js";
import type { Kind, KubeApiEmulator, KubeObject } from "./kube-api-emulator.js";
import { DemoBackends } from "./demo-backends.js";
import { NO_TRACE, type StageTrace } from "../adapters/stage-trace.js";

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
      out.set(`${kind}/${namespace}/${item.metadata.name}`, {
        kind,
        obj: { ...item, metadata: { ...item.metadata, namespace } },
      });
    }
  }
  return out;
}

/** Linux answers every 127.0.0.0/8 address on loopback: several endpoints of one slice can share a port. */
const LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** Loopback addresses and ports the demo's endpoints point at: each gets a demo backend. */
function loopbackEndpoints(objects: Iterable<{ kind: Kind; obj: KubeObject }>): Array<{ host: string; port: number }> {
  const found = new Map<string, { host: string; port: number }>();
  const add = (hosts: string[], ports: Array<{ port?: number }>) => {
    for (const host of hosts) {
      if (!LOOPBACK.test(host)) continue;
      for (const { port } of ports) if (port) found.set(`${host}:${port}`, { host, port });
    }
  };
  for (const { kind, obj } of objects) {
    if (kind === "EndpointSlice") {
      const eps = (obj.endpoints as Array<{ addresses?: string[] }> | undefined) ?? [];
      add(
        eps.flatMap((e) => e.addresses ?? []),
        (obj.ports as Array<{ port?: number }> | undefined) ?? [],
      );
    } else if (kind === "Endpoints") {
      for (const s of (obj.subsets as
        | Array<{ addresses?: Array<{ ip: string }>; ports?: Array<{ port?: number }> }>
        | undefined) ?? []) {
        add(
          (s.addresses ?? []).map((a) => a.ip),
          s.ports ?? [],
        );
      }
    }
  }
  return [...found.values()];
}

/**
 * The embedded demo cluster of `npm start`: a cluster file served by the Kubernetes API emulator,
 * re-applied whenever the file changes (a file that does not parse leaves the cluster as it was),
 * and a small HTTP server on every loopback address and port its endpoints name, so real requests flow.
 */
export class DemoCluster {
  private applied = new Map<string, string>();
  private watcher: FSWatcher | undefined;
  private replaced = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly backends = new Set<string>();
  private readonly processes = new DemoBackends();

  constructor(
    private readonly file: string,
    private readonly api: KubeApiEmulator,
    private readonly log: Logger,
    /** Stage timing of file edits (bench/e2e). */
    private readonly trace: StageTrace = NO_TRACE,
  ) {}

  /** Applies the file to the emulator: changed objects are written, vanished ones deleted. */
  async load(): Promise<{ written: number; removed: number }> {
    this.trace("load.start");
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
    for (const { host, port } of loopbackEndpoints(objects.values())) await this.startBackend(host, port);
    this.trace("load.end", { written, removed });
    return { written, removed };
  }

  watch(): void {
    // Editors replace files as often as they write them. A "change" keeps the watch; a "rename"
    // (the file replaced or moved away) needs a new watch on whatever now has the name.
    this.watcher = watch(this.file, (event) => {
      if (this.timer === undefined) this.trace("fs.event");
      if (event === "rename") this.replaced = true;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.load().then(
          ({ written, removed }) => {
            if (written + removed > 0) this.log.info({ file: this.file, written, removed }, "demo cluster changed");
          },
          (err: Error) =>
            this.log.warn(
              { file: this.file, err: err.message },
              "demo cluster file not applied; the cluster keeps its last state",
            ),
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
      if (attempt === 0)
        this.log.warn({ file: this.file, err: (err as Error).message }, "cannot watch the demo cluster file; retrying");
      this.timer = setTimeout(() => this.rewatch(attempt + 1), Math.min(1000, 50 * 2 ** attempt));
    }
  }

  private async startBackend(host: string, port: number): Promise<void> {
    const key = `${host}:${port}`;
    if (this.backends.has(key)) return;
    this.backends.add(key);
    const { error } = await this.processes.start(host, port);
    if (error)
      this.log.warn(
        { address: key, err: error },
        "demo backend address is taken; requests to it reach whatever listens there",
      );
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.watcher?.close();
    await this.processes.stop();
  }
}
