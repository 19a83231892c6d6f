import { KubeApiEmulator, type Refusal, type RequestInfo, type Resource } from "../../shared/dev/kube-api-emulator.js";

/**
 * The Kubernetes API emulator with the faults tests inject: failures, delays and RBAC denials,
 * through the emulator's `refuse` hook. The local stack runs the plain emulator.
 */

export type Verb = "get" | "list" | "watch" | "create" | "update" | "delete";
export type RequestMatch = (req: RequestInfo) => boolean;

export interface FailRule {
  status?: number;
  reason?: string;
  message?: string;
  /** How many matching requests fail; default 1. */
  times?: number;
  match?: RequestMatch;
}

export interface DelayRule {
  ms: number;
  /** How many matching requests are delayed; default Infinity. */
  times?: number;
  match?: RequestMatch;
}

type Counted<R> = R & { times: number };

const RESOURCE_PATH =
  /^\/(?:api\/v1|apis\/(discovery\.k8s\.io|gateway\.networking\.k8s\.io)\/v1(?:beta1)?)\/(?:namespaces\/([^/]+)\/)?(services|endpoints|endpointslices|gatewayclasses|gateways|httproutes|referencegrants)(?:\/([^/]+))?$/;

export class TestKubeApi extends KubeApiEmulator {
  private failRules: Array<Counted<FailRule>> = [];
  private delayRules: Array<Counted<DelayRule>> = [];
  private holdRules: Array<Counted<{ match: RequestMatch; released: Promise<void>; arrived: () => void }>> = [];
  private forbidden = new Map<Resource, Set<Verb>>();

  /** Answer the next matching request(s) with an error Status (default: one 500). */
  failNext(rule: FailRule = {}): void {
    this.failRules.push({ ...rule, times: rule.times ?? 1 });
  }

  /** Hold matching requests before answering them (default: every request, until reset). */
  delay(rule: DelayRule): void {
    this.delayRules.push({ ...rule, times: rule.times ?? Infinity });
  }

  /**
   * Hold the next matching request until the returned function is called; `held` resolves when
   * that request has arrived (and is being held).
   */
  hold(match: RequestMatch): { held: Promise<void>; release: () => void } {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let arrived = () => {};
    const held = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    this.holdRules.push({ match, times: 1, released, arrived });
    return { held, release };
  }

  /** Deny `verbs` on a resource to the server's user, as RBAC would (403 Forbidden). */
  forbid(resource: Resource, verbs: Verb[] = ["list", "watch"]): void {
    this.forbidden.set(resource, new Set(verbs));
  }

  /** Clear injected failures, delays and denials too. */
  override reset(): void {
    super.reset();
    this.failRules = [];
    this.delayRules = [];
    this.holdRules = [];
    this.forbidden.clear();
  }

  protected override async refuse(req: RequestInfo): Promise<Refusal | undefined> {
    const hold = take(this.holdRules, req);
    if (hold) {
      hold.arrived();
      await hold.released;
    }
    const delay = take(this.delayRules, req);
    if (delay) await new Promise((r) => setTimeout(r, delay.ms));
    const failure = take(this.failRules, req);
    if (failure)
      return {
        status: failure.status ?? 500,
        reason: failure.reason ?? "InternalError",
        message:
          failure.message ?? 'an error on the server ("injected failure") has prevented the request from succeeding',
      };
    return this.denial(req);
  }

  /** The real server's 403 for a verb RBAC does not grant, worded as it words it. */
  private denial(req: RequestInfo): Refusal | undefined {
    const m = RESOURCE_PATH.exec(req.path);
    if (!m) return undefined;
    const [, group = "", namespace, resource, name] = m as unknown as [
      string,
      string | undefined,
      string | undefined,
      Resource,
      string | undefined,
    ];
    const verb = verbOf(req, name !== undefined);
    if (!this.forbidden.get(resource)?.has(verb)) return undefined;
    const scope = namespace === undefined ? "at the cluster scope" : `in the namespace "${namespace}"`;
    return {
      status: 403,
      reason: "Forbidden",
      message: `${resource} is forbidden: User "${this.user}" cannot ${verb} resource "${resource}" in API group "${group}" ${scope}`,
      details: group ? { group, kind: resource } : { kind: resource },
    };
  }
}

function verbOf(req: RequestInfo, named: boolean): Verb {
  if (req.method === "POST") return "create";
  if (req.method === "PUT") return "update";
  if (req.method === "DELETE") return "delete";
  if (named) return "get";
  return req.query.watch === "true" || req.query.watch === "1" ? "watch" : "list";
}

function take<R extends { times: number; match?: RequestMatch }>(rules: R[], req: RequestInfo): R | undefined {
  const rule = rules.find((r) => r.times > 0 && (r.match?.(req) ?? true));
  if (rule) rule.times--;
  return rule;
}
