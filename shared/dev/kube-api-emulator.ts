import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { matchesSelector, parseLabelSelector, type LabelSelector } from "../core/kubernetes/label-selector.js";
import { BodyTooLargeError, readBody } from "../adapters/request-body.js";
import type { StageTrace } from "../adapters/stage-trace.js";
import { errorMessage } from "../core/error-message.js";

/**
 * A Kubernetes API server for the local stack's demo cluster and for tests, speaking the real
 * wire protocol (paths, list/watch JSON, Status errors, continue tokens) so that servicelb is
 * exercised through the real client-node. Only what servicelb reads is served: Services,
 * EndpointSlices and v1 Endpoints, and the Gateway API kinds (GatewayClass, Gateway, HTTPRoute,
 * ReferenceGrant) as a cluster with their CRDs installed serves them, with the status
 * subresource of the first three and `metadata.generation` bumped on every change of spec. Injected faults (failures, delays, RBAC denials) are not
 * here: tests add them through `refuse` (test/support/kube-api.ts).
 */

export type Kind =
  | "Service"
  | "EndpointSlice"
  | "Endpoints"
  | "GatewayClass"
  | "Gateway"
  | "HTTPRoute"
  | "ReferenceGrant";
export type Resource =
  | "services"
  | "endpointslices"
  | "endpoints"
  | "gatewayclasses"
  | "gateways"
  | "httproutes"
  | "referencegrants";

interface KindInfo {
  resource: Resource;
  group: "" | "discovery.k8s.io" | "gateway.networking.k8s.io";
  apiVersion: string;
  listKind: string;
  /** Cluster-scoped: no namespace, paths without `namespaces/<ns>/`. */
  cluster?: boolean;
  /** Has a status subresource: writes to the object keep its status, `…/status` writes only that. */
  status?: boolean;
}

const GATEWAY_GROUP = "gateway.networking.k8s.io";

const KINDS: Record<Kind, KindInfo> = {
  Service: { resource: "services", group: "", apiVersion: "v1", listKind: "ServiceList" },
  Endpoints: { resource: "endpoints", group: "", apiVersion: "v1", listKind: "EndpointsList" },
  EndpointSlice: {
    resource: "endpointslices",
    group: "discovery.k8s.io",
    apiVersion: "discovery.k8s.io/v1",
    listKind: "EndpointSliceList",
  },
  GatewayClass: {
    resource: "gatewayclasses",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1`,
    listKind: "GatewayClassList",
    cluster: true,
    status: true,
  },
  Gateway: {
    resource: "gateways",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1`,
    listKind: "GatewayList",
    status: true,
  },
  HTTPRoute: {
    resource: "httproutes",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1`,
    listKind: "HTTPRouteList",
    status: true,
  },
  ReferenceGrant: {
    resource: "referencegrants",
    group: GATEWAY_GROUP,
    apiVersion: `${GATEWAY_GROUP}/v1beta1`,
    listKind: "ReferenceGrantList",
  },
};

const KIND_OF: Record<Resource, Kind> = {
  services: "Service",
  endpoints: "Endpoints",
  endpointslices: "EndpointSlice",
  gatewayclasses: "GatewayClass",
  gateways: "Gateway",
  httproutes: "HTTPRoute",
  referencegrants: "ReferenceGrant",
};

const GATEWAY_PATH = new RegExp(
  `^/apis/${GATEWAY_GROUP.replace(/\./g, "\\.")}/(v1|v1beta1)/(?:namespaces/([^/]+)/)?(gatewayclasses|gateways|httproutes|referencegrants)(?:/([^/]+))?(/status)?$`,
);

export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
  uid?: string;
  creationTimestamp?: string;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

type EventType = "ADDED" | "MODIFIED" | "DELETED";

/** One write, in revision order; `prev` lets a selector-filtered watch turn label changes into ADDED/DELETED. */
interface Change {
  rv: number;
  type: EventType;
  kind: Kind;
  key: string;
  object: KubeObject;
  prev: KubeObject | undefined;
}

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

interface Route {
  kind: Kind;
  namespace: string | undefined;
  /** Set for an object path (…/namespaces/<ns>/<resource>/<name>): the target of PUT and DELETE. */
  name?: string;
  /** The object's status subresource (…/<name>/status). */
  status?: boolean;
}

/**
 * Upper bound of a watch request, like the real server's --min-request-timeout; the client's
 * timeoutSeconds may shorten it. Tests that need a stream to end call endWatches() instead.
 */
const WATCH_TIMEOUT_MS = 60_000;

/** Largest request body a write may carry, like the real server's 3 MiB limit. */
const MAX_BODY_BYTES = 3 * 2 ** 20;

interface Watcher {
  route: Route;
  selector: LabelSelector;
  res: http.ServerResponse;
}

const EXPIRED_MESSAGE =
  "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

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

/** Answered as a Kubernetes Status object: the HTTP code, its reason and message. */
class KubeStatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly extra: { details?: object; metadata?: object } = {},
  ) {
    super(message);
  }
}

export class KubeApiEmulator {
  readonly token: string;
  readonly user: string;
  readonly endpointSlices: boolean;
  readonly gatewayApi: boolean;
  readonly requests: RequestInfo[] = [];

  private readonly server = http.createServer((req, res) => void this.handle(req, res));
  private rv: number;
  /** State at `baseRv`; `history` holds every change after it. Compaction moves the base forward. */
  private base = new Map<Kind, Map<string, KubeObject>>();
  private baseRv: number;
  private history: Change[] = [];
  private current = new Map<Kind, Map<string, KubeObject>>();
  private tokenGeneration = 0;
  private requestHooks: Array<(req: RequestInfo) => void> = [];
  private watchers = new Set<Watcher>();
  private port = 0;
  private readonly trace: StageTrace | undefined;
  /**
   * The objects of one kind at one revision, sorted by key: what every page of a list reads. Built
   * once per (kind, revision) and kept for the few revisions whose lists may still be paging, so
   * that a list of N objects in pages of L costs one sort, not N/L copies, replays and sorts.
   */
  private sortedCache = new Map<string, Array<[string, KubeObject]>>();

  constructor(options: KubeApiEmulatorOptions = {}) {
    this.token = options.token ?? randomBytes(16).toString("hex");
    this.user = options.user ?? "system:serviceaccount:servicelb:servicelb";
    this.endpointSlices = options.endpointSlices ?? true;
    this.gatewayApi = options.gatewayApi ?? true;
    this.rv = this.baseRv = options.resourceVersion ?? 1;
    this.trace = options.trace;
    for (const kind of Object.keys(KINDS) as Kind[]) {
      this.base.set(kind, new Map());
      this.current.set(kind, new Map());
    }
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The current etcd-like revision: the resourceVersion a list started now would carry. */
  get resourceVersion(): string {
    return String(this.rv);
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
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  /** Create or replace an object; it gets the next resourceVersion. Returns the stored object. */
  upsert(kind: Kind, obj: KubeObject): KubeObject {
    const info = KINDS[kind];
    const namespace = info.cluster ? undefined : (obj.metadata.namespace ?? "default");
    const key = `${namespace ?? ""}/${obj.metadata.name}`;
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
    return structuredClone(stored);
  }

  /** The object as stored now (a copy), or undefined: what a test reads back after a write. */
  read(kind: Kind, namespace: string, name: string): KubeObject | undefined {
    const obj = this.current.get(kind)!.get(`${KINDS[kind].cluster ? "" : namespace}/${name}`);
    return obj && structuredClone(obj);
  }

  /** Delete an object; returns false when it did not exist. */
  remove(kind: Kind, namespace: string, name: string): boolean {
    const key = `${KINDS[kind].cluster ? "" : namespace}/${name}`;
    const prev = this.current.get(kind)!.get(key);
    if (!prev) return false;
    const rv = ++this.rv;
    // A DELETED event carries the object as last seen, stamped with the deletion's revision.
    const object = { ...prev, metadata: { ...prev.metadata, resourceVersion: String(rv) } };
    this.record({ rv, type: "DELETED", kind, key, object, prev });
    return true;
  }

  /** Every continue token handed out so far now answers 410 Expired. */
  expireContinueTokens(): void {
    this.tokenGeneration++;
  }

  /** Forget history up to now, like etcd compaction: older watch resourceVersions answer 410. */
  compact(): void {
    this.sortedCache.clear();
    this.base = new Map([...this.current].map(([kind, objects]) => [kind, new Map(objects)]));
    this.baseRv = this.rv;
    this.history = [];
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

  private record(change: Change): void {
    this.history.push(change);
    const objects = this.current.get(change.kind)!;
    if (change.type === "DELETED") objects.delete(change.key);
    else objects.set(change.key, change.object);
    for (const w of this.watchers) {
      if (w.route.kind === change.kind) this.pushEvent(w, change);
    }
    this.trace?.("write", { rv: change.rv, kind: change.kind, key: change.key });
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
      if (info.method === "GET") return this.route(info, res);
      if (info.method === "POST" || info.method === "PUT" || info.method === "DELETE")
        return this.write(info, await readRequestBody(req), res);
      throw new KubeStatusError(
        405,
        "MethodNotAllowed",
        `the server does not allow this method on the requested resource`,
      );
    } catch (thrown) {
      const err =
        thrown instanceof KubeStatusError
          ? thrown
          : new KubeStatusError(500, "InternalError", `Internal error occurred: ${String(thrown)}`);
      json(res, err.code, {
        kind: "Status",
        apiVersion: "v1",
        metadata: err.extra.metadata ?? {},
        status: "Failure",
        message: err.message,
        reason: err.reason,
        ...(err.extra.details ? { details: err.extra.details } : {}),
        code: err.code,
      });
    }
  }

  /**
   * Called for every request after the request hooks and before authentication: a Status to
   * answer instead, or undefined to serve it. The emulator refuses nothing itself; a subclass may
   * wait (a slow server) or refuse (a failure, an RBAC denial).
   */
  protected refuse(_req: RequestInfo): Refusal | undefined | Promise<Refusal | undefined> {
    return undefined;
  }

  private route(info: RequestInfo, res: http.ServerResponse): void {
    const doc = this.discovery(info.path);
    if (doc) {
      json(res, 200, doc);
      return;
    }
    const route = this.parseListPath(info.path);
    if (!route) throw notFound();
    if (route.name !== undefined) {
      this.get(route, res);
      return;
    }
    const verb = info.query.watch === "true" || info.query.watch === "1" ? "watch" : "list";
    const selector = parseSelector(info.query.labelSelector ?? "");
    if (verb === "watch") this.watch(route, selector, info.query, res);
    else this.list(route, selector, info.query, res);
  }

  private parseListPath(path: string): Route | undefined {
    const gateway = this.gatewayApi ? GATEWAY_PATH.exec(path) : null;
    if (gateway) {
      const [, version, namespace, resource, name, status] = gateway;
      const kind = KIND_OF[resource as Resource];
      const info = KINDS[kind];
      if (info.apiVersion !== `${GATEWAY_GROUP}/${version}`) return undefined;
      // Namespaced kinds are read across namespaces or in one; cluster-scoped ones never in one.
      if (info.cluster ? namespace !== undefined : name !== undefined && namespace === undefined) return undefined;
      if (status && (!info.status || name === undefined)) return undefined;
      return {
        kind,
        namespace: info.cluster ? undefined : namespace,
        ...(name !== undefined ? { name: decodeURIComponent(name) } : {}),
        ...(status ? { status: true } : {}),
      };
    }
    const core = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?(services|endpoints)(?:\/([^/]+))?$/.exec(path);
    const discovery = /^\/apis\/discovery\.k8s\.io\/v1\/(?:namespaces\/([^/]+)\/)?(endpointslices)(?:\/([^/]+))?$/.exec(
      path,
    );
    const m = core ?? (this.endpointSlices ? discovery : null);
    if (!m) return undefined;
    // An object lives in a namespace: /api/v1/services/<name> is not a path of the real server.
    if (m[3] !== undefined && m[1] === undefined) return undefined;
    return {
      kind: KIND_OF[m[2] as Resource],
      namespace: m[1],
      ...(m[3] !== undefined ? { name: decodeURIComponent(m[3]) } : {}),
    };
  }

  /**
   * Writes as kubectl sends them: POST to a namespaced collection creates (409 when the object
   * exists), PUT to an object replaces it (404 when it does not exist; 409 when the body names a
   * resourceVersion that is no longer current), DELETE removes it. Each write is one revision and
   * one watch event, exactly like upsert() and remove().
   */
  private write(info: RequestInfo, body: string, res: http.ServerResponse): void {
    const route = this.parseListPath(info.path);
    if (!route || (route.namespace === undefined && !KINDS[route.kind].cluster)) throw notFound();
    const { resource, group } = KINDS[route.kind];
    if (route.status && info.method !== "PUT")
      throw new KubeStatusError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
      );
    const groupResource = group ? `${resource}.${group}` : resource;
    const verb = info.method === "POST" ? "create" : info.method === "PUT" ? "update" : "delete";
    if ((verb === "create") !== (route.name === undefined))
      throw new KubeStatusError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
      );
    const key = (name: string) => `${route.namespace ?? ""}/${name}`;
    if (verb === "delete") {
      const existing = this.current.get(route.kind)!.get(key(route.name!));
      if (!existing)
        throw new KubeStatusError(404, "NotFound", `${groupResource} "${route.name}" not found`, {
          details: { name: route.name, kind: resource },
        });
      this.remove(route.kind, route.namespace ?? "", route.name!);
      json(res, 200, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Success",
        details: { name: route.name, kind: resource, uid: existing.metadata.uid },
      });
      return;
    }
    let obj: KubeObject;
    try {
      obj = JSON.parse(body) as KubeObject;
    } catch (err) {
      throw new KubeStatusError(
        400,
        "BadRequest",
        `the body of the request was in an unknown format: ${errorMessage(err)}`,
      );
    }
    const name = obj?.metadata?.name;
    if (typeof name !== "string" || name === "")
      throw new KubeStatusError(
        422,
        "Invalid",
        `${route.kind} is invalid: metadata.name: Required value: name is required`,
      );
    if (obj.kind !== undefined && obj.kind !== route.kind)
      throw new KubeStatusError(
        400,
        "BadRequest",
        `the object's kind ${String(obj.kind)} does not match the path (${route.kind})`,
      );
    if (
      obj.metadata.namespace !== undefined &&
      route.namespace !== undefined &&
      obj.metadata.namespace !== route.namespace
    ) {
      throw new KubeStatusError(
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    if (route.name !== undefined && route.name !== name)
      throw new KubeStatusError(
        400,
        "BadRequest",
        `the name of the object (${name}) does not match the name on the URL (${route.name})`,
      );
    const existing = this.current.get(route.kind)!.get(key(name));
    if (verb === "create" && existing)
      throw new KubeStatusError(409, "AlreadyExists", `${groupResource} "${name}" already exists`, {
        details: { name, kind: resource },
      });
    if (verb === "update") {
      if (!existing)
        throw new KubeStatusError(404, "NotFound", `${groupResource} "${name}" not found`, {
          details: { name, kind: resource },
        });
      const rv = obj.metadata.resourceVersion;
      if (rv !== undefined && rv !== "" && rv !== existing.metadata.resourceVersion) {
        throw new KubeStatusError(
          409,
          "Conflict",
          `Operation cannot be fulfilled on ${groupResource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          {
            details: { name, kind: resource },
          },
        );
      }
    }
    const { resourceVersion: _rv, generation: _generation, ...metadata } = obj.metadata;
    // With a status subresource, a write to the object keeps its status and one to `/status` changes only that.
    const written: KubeObject = !KINDS[route.kind].status
      ? obj
      : route.status
        ? { ...existing!, status: obj.status }
        : { ...obj, status: existing?.status };
    if (written.status === undefined) delete written.status;
    const stored = this.upsert(route.kind, {
      ...written,
      metadata: {
        ...(route.status ? existing!.metadata : metadata),
        ...(route.namespace !== undefined ? { namespace: route.namespace } : {}),
      },
    });
    json(res, verb === "create" ? 201 : 200, stored);
  }

  private discovery(path: string): object | undefined {
    const resources = (groupVersion: string, list: Array<[string, string]>) => ({
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion,
      resources: list.map(([name, kind]) => ({
        name,
        singularName: "",
        namespaced: true,
        kind,
        verbs: ["get", "list", "watch"],
      })),
    });
    const discoveryGroup = {
      name: "discovery.k8s.io",
      versions: [{ groupVersion: "discovery.k8s.io/v1", version: "v1" }],
      preferredVersion: { groupVersion: "discovery.k8s.io/v1", version: "v1" },
    };
    const gatewayGroup = {
      name: GATEWAY_GROUP,
      versions: [
        { groupVersion: `${GATEWAY_GROUP}/v1`, version: "v1" },
        { groupVersion: `${GATEWAY_GROUP}/v1beta1`, version: "v1beta1" },
      ],
      preferredVersion: { groupVersion: `${GATEWAY_GROUP}/v1`, version: "v1" },
    };
    switch (path) {
      case "/version":
        return { major: "1", minor: "33", gitVersion: "v1.33.0-fake", platform: "linux/amd64" };
      case "/api":
        return {
          kind: "APIVersions",
          versions: ["v1"],
          serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: `127.0.0.1:${this.port}` }],
        };
      case "/api/v1":
        return resources("v1", [
          ["services", "Service"],
          ["endpoints", "Endpoints"],
        ]);
      case "/apis":
        return {
          kind: "APIGroupList",
          apiVersion: "v1",
          groups: [...(this.endpointSlices ? [discoveryGroup] : []), ...(this.gatewayApi ? [gatewayGroup] : [])],
        };
      case `/apis/${GATEWAY_GROUP}`:
        return this.gatewayApi ? { kind: "APIGroup", apiVersion: "v1", ...gatewayGroup } : undefined;
      case `/apis/${GATEWAY_GROUP}/v1`:
        return this.gatewayApi
          ? resources(`${GATEWAY_GROUP}/v1`, [
              ["gatewayclasses", "GatewayClass"],
              ["gateways", "Gateway"],
              ["httproutes", "HTTPRoute"],
            ])
          : undefined;
      case `/apis/${GATEWAY_GROUP}/v1beta1`:
        return this.gatewayApi
          ? resources(`${GATEWAY_GROUP}/v1beta1`, [["referencegrants", "ReferenceGrant"]])
          : undefined;
      case "/apis/discovery.k8s.io":
        return this.endpointSlices ? { kind: "APIGroup", apiVersion: "v1", ...discoveryGroup } : undefined;
      case "/apis/discovery.k8s.io/v1":
        return this.endpointSlices
          ? resources("discovery.k8s.io/v1", [["endpointslices", "EndpointSlice"]])
          : undefined;
      default:
        return undefined;
    }
  }

  /** One object, as `kubectl get <kind> <name> -o json` reads it; 404 with the API server's Status when there is none. */
  private get(route: Route, res: http.ServerResponse): void {
    const obj = this.current.get(route.kind)!.get(`${route.namespace ?? ""}/${route.name}`);
    if (!obj) {
      const { resource, group } = KINDS[route.kind];
      throw new KubeStatusError(
        404,
        "NotFound",
        `${group ? `${resource}.${group}` : resource} "${route.name}" not found`,
        {
          details: { name: route.name, group, kind: resource },
        },
      );
    }
    json(res, 200, obj);
  }

  private list(route: Route, selector: LabelSelector, query: Record<string, string>, res: http.ServerResponse): void {
    const info = KINDS[route.kind];
    let listRv = this.rv;
    let after = "";
    if (query.continue) {
      const token = decodeContinue(query.continue);
      if (token.gen !== this.tokenGeneration || token.rv < this.baseRv) {
        const fresh = encodeContinue({ rv: this.rv, start: token.start, gen: this.tokenGeneration });
        throw new KubeStatusError(410, "Expired", EXPIRED_MESSAGE, { metadata: { continue: fresh } });
      }
      listRv = token.rv;
      after = token.start;
    }
    // Pages of one list come from the same revision, as the real server's consistent snapshot does.
    const sorted = this.sortedAt(route.kind, listRv);
    const limit = Number(query.limit ?? 0);
    const page: Array<[string, KubeObject]> = [];
    let rest = 0;
    for (let i = after === "" ? 0 : firstAfter(sorted, after); i < sorted.length; i++) {
      const entry = sorted[i]!;
      if (!inScope(route, entry[1]) || !matches(selector, entry[1])) continue;
      if (limit > 0 && page.length === limit) {
        // Only the remaining count is still needed, and only without a selector (see below).
        if (selector.length > 0) rest = 1;
        else if (route.namespace === undefined) rest = sorted.length - i;
        else for (let j = i; j < sorted.length; j++) if (inScope(route, sorted[j]![1])) rest++;
        break;
      }
      page.push(entry);
    }
    const more = rest > 0;
    const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
    if (more) {
      metadata.continue = encodeContinue({ rv: listRv, start: page[page.length - 1]![0], gen: this.tokenGeneration });
      // The real server counts the rest only when it need not filter.
      if (selector.length === 0) metadata.remainingItemCount = rest;
    }
    // Stored objects never change (a write stores a new one), so each is serialized once, not once per list.
    const items = page.map(([, obj]) => {
      let text = serialized.get(obj);
      if (text === undefined) {
        text = JSON.stringify(withoutTypeMeta(obj));
        serialized.set(obj, text);
      }
      return text;
    });
    const text = `{"kind":${JSON.stringify(info.listKind)},"apiVersion":${JSON.stringify(info.apiVersion)},"metadata":${JSON.stringify(metadata)},"items":[${items.join(",")}]}`;
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
    res.end(text);
  }

  private sortedAt(kind: Kind, rv: number): Array<[string, KubeObject]> {
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

  private watch(route: Route, selector: LabelSelector, query: Record<string, string>, res: http.ServerResponse): void {
    const from = query.resourceVersion;
    const fromRv = from === undefined || from === "" || from === "0" ? undefined : Number(from);
    if (fromRv !== undefined && !(Number.isInteger(fromRv) && fromRv >= 0)) {
      throw new KubeStatusError(400, "BadRequest", `invalid resource version: ${from}`);
    }
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    // The real server answers the head at once; a client may wait for it before the first event.
    res.flushHeaders();
    const watcher: Watcher = { route, selector, res };
    if (fromRv !== undefined && fromRv < this.baseRv) {
      // The real server reports a compacted revision as an ERROR event, then ends the stream.
      const status = {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: `too old resource version: ${fromRv} (${this.baseRv})`,
        reason: "Expired",
        code: 410,
      };
      res.end(`${JSON.stringify({ type: "ERROR", object: status })}\n`);
      return;
    }
    if (fromRv === undefined) {
      // No resourceVersion: synthetic ADDED events for the current state, then changes.
      for (const obj of this.current.get(route.kind)!.values()) {
        if (inScope(route, obj) && matches(selector, obj))
          res.write(`${JSON.stringify({ type: "ADDED", object: obj })}\n`);
      }
    } else {
      for (const change of this.history) {
        if (change.rv > fromRv && change.kind === route.kind) this.pushEvent(watcher, change);
      }
    }
    this.watchers.add(watcher);
    const requested = Number(query.timeoutSeconds ?? 0) * 1000;
    const timer = setTimeout(() => res.end(), requested > 0 ? Math.min(requested, WATCH_TIMEOUT_MS) : WATCH_TIMEOUT_MS);
    res.on("close", () => {
      clearTimeout(timer);
      this.watchers.delete(watcher);
    });
  }

  private pushEvent(w: Watcher, change: Change): void {
    if (!inScope(w.route, change.object)) return;
    const was = change.prev !== undefined && matches(w.selector, change.prev);
    const is = change.type !== "DELETED" && matches(w.selector, change.object);
    // Like the real server, a selector-filtered watch sees an object leave or enter its selection.
    const type: EventType | undefined =
      change.type === "DELETED"
        ? was
          ? "DELETED"
          : undefined
        : was && is
          ? "MODIFIED"
          : is
            ? "ADDED"
            : was
              ? "DELETED"
              : undefined;
    if (type) w.res.write(`${JSON.stringify({ type, object: change.object })}\n`);
  }
}

/** A list item's JSON, per stored object. */
const serialized = new WeakMap<KubeObject, string>();

/** Index of the first entry whose key sorts after `key`. */
function firstAfter(sorted: Array<[string, KubeObject]>, key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]![0] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function inScope(route: Route, obj: KubeObject): boolean {
  return route.namespace === undefined || obj.metadata.namespace === route.namespace;
}

/** Items inside a real list response carry no apiVersion/kind; the list itself does. */
function withoutTypeMeta(obj: KubeObject): Omit<KubeObject, "apiVersion" | "kind"> {
  const { apiVersion: _apiVersion, kind: _kind, ...rest } = obj;
  return rest;
}

/** metadata.generation as the API server keeps it for kinds with a status subresource: +1 per change of spec. */
function nextGeneration(prev: KubeObject | undefined, obj: KubeObject): number {
  const before = prev?.metadata.generation;
  if (prev === undefined || typeof before !== "number")
    return typeof obj.metadata.generation === "number" ? obj.metadata.generation : 1;
  return JSON.stringify(prev.spec) === JSON.stringify(obj.spec) ? before : before + 1;
}

function notFound(): KubeStatusError {
  return new KubeStatusError(404, "NotFound", "the server could not find the requested resource", { details: {} });
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

interface ContinueToken {
  rv: number;
  start: string;
  gen: number;
}

/** Opaque to clients, like the real token (base64 JSON with the list revision and the last key). */
function encodeContinue(token: ContinueToken): string {
  return Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", ...token })).toString("base64url");
}

function decodeContinue(text: string): ContinueToken {
  try {
    const t = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as Partial<ContinueToken> & { v?: string };
    if (
      t.v === "meta.k8s.io/v1" &&
      typeof t.rv === "number" &&
      typeof t.start === "string" &&
      typeof t.gen === "number"
    ) {
      return { rv: t.rv, start: t.start, gen: t.gen };
    }
  } catch {
    // fall through to the same answer the real server gives for garbage
  }
  throw new KubeStatusError(400, "BadRequest", `continue key is not valid: ${text}`);
}

/** The API server's equality-based selectors; set-based ones are refused as unsupported here. */
function parseSelector(text: string): LabelSelector {
  if (text.includes("("))
    throw new KubeStatusError(
      400,
      "BadRequest",
      `unable to parse requirement: set-based selectors are not supported by the emulator: ${text}`,
    );
  try {
    return parseLabelSelector(text);
  } catch (err) {
    throw new KubeStatusError(400, "BadRequest", `unable to parse requirement: ${errorMessage(err)}`);
  }
}

function matches(selector: LabelSelector, obj: KubeObject): boolean {
  return matchesSelector(selector, obj.metadata.labels ?? {});
}
