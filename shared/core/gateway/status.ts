/*
 * The status servicelb owes the Gateway API objects of its class, as a pure value: conditions per
 * HTTPRoute parent, per Gateway and per listener, and per GatewayClass, each with the generation
 * it describes. No lastTransitionTime here: whoever writes the status keeps the one already
 * stored when a condition did not change, so that writes stay idempotent.
 */

export const CONTROLLER_NAME = "servicelb.io/gateway-controller";

export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  observedGeneration: number;
}

export interface ParentRefStatus {
  group: string;
  kind: string;
  namespace: string;
  name: string;
  sectionName?: string;
  port?: number;
}

export interface RouteParentStatus {
  parentRef: ParentRefStatus;
  controllerName: typeof CONTROLLER_NAME;
  conditions: Condition[];
}

export interface RouteStatus {
  namespace: string;
  name: string;
  parents: RouteParentStatus[];
}

export interface ListenerStatus {
  name: string;
  supportedKinds: Array<{ group: string; kind: string }>;
  attachedRoutes: number;
  conditions: Condition[];
}

export interface GatewayObjectStatus {
  namespace: string;
  name: string;
  conditions: Condition[];
  listeners: ListenerStatus[];
}

export interface GatewayClassStatus {
  name: string;
  conditions: Condition[];
}

export interface GatewayStatus {
  gatewayClasses: GatewayClassStatus[];
  gateways: GatewayObjectStatus[];
  httpRoutes: RouteStatus[];
}

export function condition(
  type: string,
  ok: boolean,
  reason: string,
  message: string,
  observedGeneration: number,
): Condition {
  return { type, status: ok ? "True" : "False", reason, message, observedGeneration };
}
