/*
 * Which Service port each backend serves, as a map carried with the config's route maps
 * (pattern-files.ts): `maps/backends.map`, a line `<backend> <namespace>/<service>/<port>` per
 * backend that serves one. The agent reads it from the config it runs to publish
 * servicelb_backend_info (agent/service-series.ts), which joins HAProxy's per-backend series to
 * Services. A spare that takes a Service (backend-layout.ts) changes one line of it and nothing
 * else, so the join follows without a reload.
 *
 * HAProxy never looks the map up; it must load it all the same, because the agent swaps a
 * changed file through the runtime API (`prepare map`), which knows only the files HAProxy
 * loaded. SERVICE_MAP_REFERENCE does that with a rule that never runs.
 * Pure; every line is checked against its grammar both ways.
 */

import { describeValue } from "../describe-value.js";
import type { Backend, ServicePortRef } from "../model/model.js";
import { ROUTE_MAP_DIR } from "./route-maps.js";

export const SERVICE_MAP = `${ROUTE_MAP_DIR}/backends.map`;

/**
 * Loads the map into HAProxy, in the HTTP frontend before the route lookup (where `default-path
 * config` makes the path relative to haproxy.cfg; before `use_backend`, which HAProxy warns of
 * otherwise). `if FALSE` (a predefined ACL): parsed, never run.
 */
export const SERVICE_MAP_REFERENCE = `    # ${SERVICE_MAP} names the Service port of each backend for the agent's metrics. This never
    # runs: it makes HAProxy load the map, so that the agent can change it without a reload.
    http-request set-var(txn.service) var(txn.route),map_str(${SERVICE_MAP}) if FALSE
`;

export interface ServiceMapEntry extends ServicePortRef {
  backend: string;
}

const LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
const BACKEND = /^[a-z0-9][a-z0-9_.-]{0,300}$/;
const VALUE = new RegExp(`^(${LABEL})/(${LABEL})/([1-9][0-9]{0,4})$`);

/** The Service port `b` serves, or null for a free spare or a vacated backend. */
export function servedBy(b: Backend): ServicePortRef | null {
  if (b.carries !== undefined) return b.carries;
  return { namespace: b.namespace, service: b.service, port: b.servicePort };
}

/** `b`'s line of the map, or null when it serves no Service port. */
export function serviceMapLine(b: Backend): string | null {
  const s = servedBy(b);
  return s === null ? null : `${b.name} ${s.namespace}/${s.service}/${s.port}`;
}

/** One line of the map, or why it is not one. */
export function parseServiceMapLine(line: string): ServiceMapEntry | string {
  const space = line.indexOf(" ");
  if (space < 0) return "is not <backend> <namespace>/<service>/<port>";
  const backend = line.slice(0, space);
  if (!BACKEND.test(backend)) return `${describeValue(backend, 60)} is not a backend name`;
  const m = VALUE.exec(line.slice(space + 1));
  const port = Number(m?.[5]);
  if (!m || port > 65535)
    return `${JSON.stringify(line.slice(space + 1, space + 61))} is not <namespace>/<service>/<port>`;
  return { backend, namespace: m[1]!, service: m[3]!, port };
}
