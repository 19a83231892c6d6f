import { watch, type FSWatcher, readFileSync } from "node:fs";
import { parseSnapshotText } from "../core/kubernetes/snapshot.js";
import type { Logger } from "../adapters/log.js";
import type { Kind, KubeApiEmulator, KubeObject } from "./kube-api-emulator.js";
import { DemoBackends } from "./demo-backends.js";
import { NO_TRACE, type StageTrace } from "../adapters/stage-trace.js";
import { errorMessage } from "../core/error-message.js";

const KINDS = new Set<Kind>([
  "Service",
  "EndpointSlice",
  "Endpoints",
  "GatewayClass",
  "Gateway",
  "HTTPRoute",
  "ReferenceGrant",
]);

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

/** An endpoint port a hand-made file gives that no backend can listen on. */
interface NoPort {
  object: string;
  host: string;
  port: unknown;
}

const asArray = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const portsOf = (value: unknown): unknown[] => asArray(value).map((p) => (p as { port?: unknown } | null)?.port);

/**
 * Loopback addresses and ports the demo's endpoints point at: each gets a demo backend. The file
 * is hand-made, so nothing in it is taken on trust: a port that is no port (-5, 1.5, 70000) is
 * reported rather than handed to listen(), and a field of the wrong shape reads as empty.
 */
function loopbackEndpoints(objects: Iterable<{ kind: Kind; obj: KubeObject }>): {
  endpoints: Array<{ host: string; port: number }>;
  noPorts: NoPort[];
} {
  const found = new Map<string, { host: string; port: number }>();
  const noPorts: NoPort[] = [];
  const add = (object: string, hosts: unknown[], ports: unknown[]) => {
    for (const host of hosts) {
      if (typeof host !== "string" || !LOOPBACK.test(host)) continue;
      for (const port of ports) {
        // No port at all: the slice serves every port of its pods, which the demo has none of.
        if (port === undefined || port === null) continue;
        if (typeof port === "number" && Number.isInteger(port) && port >= 1 && port <= 65535)
          found.set(`${host}:${port}`, { host, port });
        else noPorts.push({ object, host, port });
      }
    }
  };
  for (const { kind, obj } of objects) {
    const object = `${kind} ${obj.metadata.namespace}/${obj.metadata.name}`;
    if (kind === "EndpointSlice") {
      add(
        object,
        asArray(obj.endpoints).flatMap((e) => asArray((e as { addresses?: unknown } | null)?.addresses)),
        portsOf(obj.ports),
      );
    } else if (kind === "Endpoints") {
      for (const s of asArray(obj.subsets)) {
        const subset = s as { addresses?: unknown; ports?: unknown } | null;
        add(
          object,
          asArray(subset?.addresses).map((a) => (a as { ip?: unknown } | null)?.ip),
          portsOf(subset?.ports),
        );
      }
    }
  }
  return { endpoints: [...found.values()], noPorts };
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
  private readonly processes: DemoBackends;

  constructor(
    private readonly file: string,
    private readonly api: KubeApiEmulator,
    private readonly log: Logger,
    /** Stage timing of file edits (bench/e2e). */
    private readonly trace: StageTrace = NO_TRACE,
  ) {
    this.processes = new DemoBackends(log);
  }

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
    const { endpoints, noPorts } = loopbackEndpoints(objects.values());
    for (const { object, host, port } of noPorts)
      this.log.warn(
        { file: this.file, object, address: host, port },
        "demo cluster: an endpoint port is no port (1-65535); no demo backend for it, everything else is served",
      );
    for (const { host, port } of endpoints) await this.startBackend(host, port);
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
        this.log.warn({ file: this.file, err: errorMessage(err) }, "cannot watch the demo cluster file; retrying");
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
