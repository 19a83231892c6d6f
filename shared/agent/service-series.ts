/*
 * What the info series (metrics.ts: servicelb_backend_info, servicelb_server_info) say of the
 * config HAProxy runs: the Service port of each backend, from the config's Service map
 * (core/service-map.ts), and the address of each slot that carries an endpoint, from its server
 * lines. The agent keeps the running config's text up to date through runtime changes (a spare
 * taking a Service changes its map line and slots, a slot re-addressed changes its line), so
 * these follow HAProxy without a reload, and a reload changes them with the text.
 * Pure: text in, rows out.
 */

import { parseServer, sectionOf } from "../core/config-diff.js";
import { parseServiceMapLine, SERVICE_MAP, type ServiceMapEntry } from "../core/service-map.js";
import type { Split } from "./split-memo.js";

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

/** The rows of a config split by splitConfig; a config that does not split has none. */
export function serviceSeriesOf(split: Split): ServiceSeries {
  if ("error" in split) return NO_SERIES;
  const backends: ServiceMapEntry[] = [];
  for (const line of split.files.get(SERVICE_MAP) ?? []) {
    const entry = parseServiceMapLine(line);
    if (typeof entry !== "string") backends.push(entry);
  }
  const servers: ServerRow[] = [];
  let backend: string | null = null;
  for (const line of split.head.split("\n")) {
    const section = sectionOf(line);
    if (section !== undefined) {
      backend = section;
      continue;
    }
    const s = backend === null ? undefined : parseServer(line);
    // A free slot (disabled) carries no endpoint: no series for it.
    if (s?.enabled) {
      const host = s.address.includes(":") ? `[${s.address}]` : s.address;
      servers.push({ backend: backend!, server: s.server, address: `${host}:${s.port}` });
    }
  }
  return { backends, servers };
}
