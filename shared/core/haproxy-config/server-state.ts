/*
 * The server-state file HAProxy loads at every (re)start (`load-server-state-from-file global`).
 *
 * Saved before a reload, it carries health and maintenance states over to the new worker. But
 * HAProxy 2.6 also takes each server's PORT from the file, silently overriding the config
 * (haproxy/haproxy#985, #1412, #2103: "works as designed"; measured here: a slot moved to a
 * new endpoint came up on the old port, another served a wrong backend). So the dump is
 * filtered against the config about to load: a server's saved state is kept only where the
 * new config names the same backend, server, address and port, i.e. the same endpoint.
 *
 * Between reloads the file holds no servers (EMPTY_SERVER_STATE), so that a restart after a
 * crash loads the config alone and never a stale dump.
 * Pure: a dump and a parsed config in, the file's text out.
 */

import { type HaproxyConfig, serverSlots } from "./parse.js";

/** A valid state file with no servers: HAProxy 2.6 loads it silently (a missing file logs a warning). */
export const EMPTY_SERVER_STATE = "1\n";

/** `show servers state` output reduced to the servers that are the same endpoint in `config`. */
export function serverStateFor(dump: string, config: HaproxyConfig): string {
  const lines = dump.split("\n");
  const header = lines[1] ?? "";
  if (lines[0] !== "1" || !header.startsWith("# ")) return EMPTY_SERVER_STATE;
  const columns = header.slice(2).split(" ");
  const col = (name: string) => columns.indexOf(name);
  const [be, srv, addr, port] = [col("be_name"), col("srv_name"), col("srv_addr"), col("srv_port")];
  if (be < 0 || srv < 0 || addr < 0 || port < 0) return EMPTY_SERVER_STATE;
  const slots = serverSlots(config);
  const kept = lines.slice(2).filter((line) => {
    const f = line.split(" ");
    const slot = slots.get(`${f[be]}/${f[srv]}`);
    return slot !== undefined && slot.address === f[addr] && String(slot.port) === f[port];
  });
  return `1\n${header}\n${kept.map((l) => `${l}\n`).join("")}`;
}
