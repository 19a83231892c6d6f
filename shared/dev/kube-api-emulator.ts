import { randomBytes } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { BodyTooLargeError, readBody } from "../adapters/request-body.js";
import type { StageTrace } from "../adapters/stage-trace.js";
import { discoveryDocument } from "./kube-api/discovery.js";
import { groupResource, KINDS, type Kind, type KubeObject } from "./kube-api/kinds.js";
import { listPage } from "./kube-api/list-pages.js";
import { parseRoute, parseSelector, type Route, type ServedGroups } from "./kube-api/paths.js";
import { Revisions } from "./kube-api/revisions.js";
import { answerFailure, json, KubeStatusError, methodNotAllowed, notFound } from "./kube-api/status-error.js";
import { WatchStreams } from "./kube-api/watch-streams.js";
import { applyWrite } from "./kube-api/writes.js";

export type { Kind, KubeObject, ObjectMeta, Resource } from "./kube-api/kinds.js";

/*
 * A Kubernetes API server for the local stack's demo cluster and for tests, speaking the real
 * wire protocol (paths, list/watch JSON, Status errors, continue tokens) so that servicelb is
 * exercised through the real client-node. Only what servicelb reads is served: Services,
 * EndpointSlices and v1 Endpoints, and the Gateway API kinds (GatewayClass, Gateway, HTTPRoute,
 * ReferenceGrant) as a cluster with their CRDs installed serves them, with the status
 * subresource of the first three and `metadata.generation` bumped on every change of spec.
 * Injected faults (failures, delays, RBAC denials) are not here: tests add them through `refuse`
 * (test/support/kube-api.ts). This file is the HTTP server and what a test or the local stack
 * calls; `kube-api/` holds its parts: the kinds, the paths a request names, the revisions
 * (storage), list pages, watch streams, writes and the discovery documents.
 */

export interface RequestInfo {
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | undefined;
  /** Filled in when the response head is written. */
  status?: number;
}

/** An error Status answered instead of the request's own answer. */
export interface Refusal {
  status: number;
  reason: string;
  message: string;
  details?: object;
}

export interface KubeApiEmulatorOptions {
  token?: string;
  /** false: a cluster without discovery.k8s.io/v1 (before 1.21): its paths answer 404. */
  endpointSlices?: boolean;
  /** false: a cluster without the Gateway API CRDs: their paths answer 404. */
  gatewayApi?: boolean;
  /** The identity named in 403 messages. */
  user?: string;
  /** The revision before the first write; real clusters are far past 1. */
  resourceVersion?: number;
  /** Stage timing of each write (bench/e2e); none by default. */
  trace?: StageTrace;
}

/** Largest request body a write may carry, like the real server's 3 MiB limit. */
const MAX_BODY_BYTES = 3 * 2 ** 20;

/** The body of a write; past MAX_BODY_BYTES the request is dropped. */
async function readRequestBody(req: http.IncomingMessage): Promise<string> {
  try {
    return await readBody(req, MAX_BODY_BYTES);
  } catch (err) {
    if (!(err instanceof BodyTooLargeError)) throw err;
    req.destroy();
    throw new KubeStatusError(413, "RequestEntityTooLarge", "the request body is too large");
  }
}

export class KubeApiEmulator {
  readonly token: string;
  readonly user: string;
  readonly endpointSlices: boolean;
  readonly gatewayApi: boolean;
  readonly requests: RequestInfo[] = [];

  private readonly server = http.createServer((req, res) => void this.handle(req, res));
  private readonly revisions: Revisions;
  private readonly watches: WatchStreams;
  private tokenGeneration = 0;
  private requestHooks: Array<(req: RequestInfo) => void> = [];
  private port = 0;

  constructor(options: KubeApiEmulatorOptions = {}) {
    this.token = options.token ?? randomBytes(16).toString("hex");
    this.user = options.user ?? "system:serviceaccount:servicelb:servicelb";
    this.endpointSlices = options.endpointSlices ?? true;
    this.gatewayApi = options.gatewayApi ?? true;
    const trace = options.trace;
    this.revisions = new Revisions(options.resourceVersion ?? 1, (change) => {
      this.watches.publish(change);
      trace?.("write", { rv: change.rv, kind: change.kind, key: change.key });
    });
    this.watches = new WatchStreams(this.revisions);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The current etcd-like revision: the resourceVersion a list started now would carry. */
  get resourceVersion(): string {
    return String(this.revisions.revision);
  }

  /** Listens on 127.0.0.1:port (any free port when 0; a given one lets a test bring a dead cluster back). */
  async start(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, "127.0.0.1", () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    this.endWatches();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /**
   * End every open watch stream, as the real server does when a watch's timeout elapses; clients
   * resume from their last resourceVersion. Lets a test choose the moment instead of racing a timer.
   */
  endWatches(): void {
    this.watches.endAll();
  }

  /** Create or replace an object; it gets the next resourceVersion. Returns the stored object. */
  upsert(kind: Kind, obj: KubeObject): KubeObject {
    return structuredClone(this.revisions.upsert(kind, obj));
  }

  /** The object as stored now (a copy), or undefined: what a test reads back after a write. */
  read(kind: Kind, namespace: string, name: string): KubeObject | undefined {
    const obj = this.revisions.stored(kind, namespace, name);
    return obj && structuredClone(obj);
  }

  /** Delete an object; returns false when it did not exist. */
  remove(kind: Kind, namespace: string, name: string): boolean {
    return this.revisions.remove(kind, namespace, name);
  }

  /** Every continue token handed out so far now answers 410 Expired. */
  expireContinueTokens(): void {
    this.tokenGeneration++;
  }

  /** Forget history up to now, like etcd compaction: older watch resourceVersions answer 410. */
  compact(): void {
    this.revisions.compact();
  }

  /** Called for every request before it is answered; lets a test act between pages. */
  onRequest(hook: (req: RequestInfo) => void): void {
    this.requestHooks.push(hook);
  }

  /** Clear the request hooks and the request log. */
  reset(): void {
    this.requestHooks = [];
    this.requests.length = 0;
  }

  /**
   * Write a kubeconfig for this server (token auth, TLS verification off because it is plain
   * http). The first context is the current one. Returns the file's path.
   */
  async writeKubeconfig(
    options: { dir?: string; contexts?: Array<{ name: string; token?: string; namespace?: string }> } = {},
  ): Promise<string> {
    const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "kube-api-emulator-")));
    const contexts = options.contexts ?? [{ name: "fake" }];
    const config = {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fake", cluster: { server: this.url, "insecure-skip-tls-verify": true } }],
      users: contexts.map((c) => ({ name: c.name, user: { token: c.token ?? this.token } })),
      contexts: contexts.map((c) => ({
        name: c.name,
        context: { cluster: "fake", user: c.name, ...(c.namespace ? { namespace: c.namespace } : {}) },
      })),
      "current-context": contexts[0]?.name ?? "",
    };
    const file = join(dir, "kubeconfig");
    await writeFile(file, stringify(config), { mode: 0o600 });
    return file;
  }

  /**
   * Called for every request after the request hooks and before authentication: a Status to
   * answer instead, or undefined to serve it. The emulator refuses nothing itself; a subclass may
   * wait (a slow server) or refuse (a failure, an RBAC denial).
   */
  protected refuse(_req: RequestInfo): Refusal | undefined | Promise<Refusal | undefined> {
    return undefined;
  }

  private get served(): ServedGroups {
    return { endpointSlices: this.endpointSlices, gatewayApi: this.gatewayApi };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    const info: RequestInfo = {
      method: req.method ?? "GET",
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      authorization: req.headers.authorization,
    };
    this.requests.push(info);
    const writeHead = res.writeHead.bind(res);
    res.writeHead = ((status: number, ...rest: unknown[]) => {
      info.status = status;
      return (writeHead as (...args: unknown[]) => http.ServerResponse)(status, ...rest);
    }) as typeof res.writeHead;

    try {
      for (const hook of this.requestHooks) hook(info);
      const refusal = await this.refuse(info);
      if (res.destroyed) return;
      if (refusal)
        throw new KubeStatusError(refusal.status, refusal.reason, refusal.message, { details: refusal.details });
      if (info.authorization !== `Bearer ${this.token}`) throw new KubeStatusError(401, "Unauthorized", "Unauthorized");
      if (info.method === "GET") {
        this.serveGet(info, res);
        return;
      }
      if (info.method === "POST" || info.method === "PUT" || info.method === "DELETE") {
        const body = await readRequestBody(req);
        const route = parseRoute(info.path, this.served);
        if (!route) throw notFound();
        const answer = applyWrite(this.revisions, route, info.method, body);
        json(res, answer.status, answer.body);
        return;
      }
      throw methodNotAllowed();
    } catch (thrown) {
      answerFailure(res, thrown);
    }
  }

  /** A GET: a discovery document, one object, a list page or a watch stream. */
  private serveGet(info: RequestInfo, res: http.ServerResponse): void {
    const doc = discoveryDocument(info.path, this.served, this.port);
    if (doc) {
      json(res, 200, doc);
      return;
    }
    const route = parseRoute(info.path, this.served);
    if (!route) throw notFound();
    if (route.name !== undefined) {
      json(res, 200, this.getObject(route));
      return;
    }
    const selector = parseSelector(info.query.labelSelector ?? "");
    if (info.query.watch === "true" || info.query.watch === "1") {
      this.watches.open(route, selector, info.query, res);
      return;
    }
    const text = listPage(this.revisions, {
      route,
      selector,
      query: info.query,
      tokenGeneration: this.tokenGeneration,
    });
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
    res.end(text);
  }

  /** One object, as `kubectl get <kind> <name> -o json` reads it; 404 with the API server's Status when there is none. */
  private getObject(route: Route): KubeObject {
    const obj = this.revisions.stored(route.kind, route.namespace, route.name!);
    if (obj) return obj;
    const { resource, group } = KINDS[route.kind];
    throw new KubeStatusError(404, "NotFound", `${groupResource(route.kind)} "${route.name}" not found`, {
      details: { name: route.name, group, kind: resource },
    });
  }
}
