/*
 * What the info series (metrics.ts: servicelb_backend_info, servicelb_server_info) say of the
 * config HAProxy runs: the Service port of each backend, from the config's Service map
 * (core/haproxy-config/service-map.ts), and the address of each slot that carries an endpoint, from its server
 * lines. The agent keeps the running config's text up to date through runtime changes (a spare
 * taking a Service changes its map line and slots, a slot re-addressed changes its line), so
 * these follow HAProxy without a reload, and a reload changes them with the text.
 * Pure: a parsed config in, rows out.
 */

import type { ParsedConfig } from "../core/haproxy-config/parse.js";
import { hostPort } from "../core/haproxy-config/server-line.js";
import { parseServiceMapLine, SERVICE_MAP, type ServiceMapEntry } from "../core/haproxy-config/service-map.js";

export interface ServerRow {
  backend: string;
  server: string;
  /** `ip:port`, `[ipv6]:port`: the endpoint the slot carries. */
  address: string;
}

export interface ServiceSeries {
  backends: ServiceMapEntry[];
  servers: ServerRow[];
}

export const NO_SERIES: ServiceSeries = { backends: [], servers: [] };

/** The rows of a parsed config; a config that does not parse has none. */
export function serviceSeriesOf(config: ParsedConfig): ServiceSeries {
  if ("error" in config) return NO_SERIES;
  const backends: ServiceMapEntry[] = [];
  for (const line of config.files.get(SERVICE_MAP) ?? []) {
    const entry = parseServiceMapLine(line);
    if (typeof entry !== "string") backends.push(entry);
  }
  const servers: ServerRow[] = [];
  for (const [backend, slots] of config.backends) {
    for (const s of slots) {
      // A free slot (disabled) carries no endpoint: no series for it.
      if (s.enabled) servers.push({ backend, server: s.server, address: hostPort(s.address, s.port) });
    }
  }
  return { backends, servers };
}
