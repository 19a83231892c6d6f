import { describe, expect, it } from "vitest";
import { serverSlots } from "../../../../shared/core/haproxy-config/parse.js";
import { EMPTY_SERVER_STATE, serverStateFor } from "../../../../shared/core/haproxy-config/server-state.js";
import { parsed } from "../../../support/haproxy-config.js";

const text = `global
    master-worker
    stats socket /run/haproxy/admin.sock mode 600 level admin expose-fd listeners
    server-state-file /var/lib/haproxy/server-state

defaults http_defaults
    mode http

frontend http from http_defaults
    bind *:80
    default_backend web

listen stats from http_defaults
    server s1 10.9.9.9:1

backend web from http_defaults
    server s1 10.0.0.1:8080 check inter 2s
    server s2 127.0.0.1:1 disabled check inter 2s
    server s3 [fd00::7]:8080 check inter 2s cookie 0a0b0c0d
`;

// `show servers state` as HAProxy 2.6.12 prints it (columns abridged after srv_port).
const header =
  "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord";
const row = (srv: string, addr: string, port: number, be = "web", op = 2) =>
  `3 ${be} 1 ${srv} ${addr} ${op} 0 1 1 5 6 3 4 6 0 0 0 - ${port} -`;

const config = parsed(text);

describe("the slots a server state is kept for", () => {
  it("are every backend server slot with its bare address and port, not the servers of a listen section", () => {
    expect([...serverSlots(config)].map(([slot, s]) => [slot, { address: s.address, port: s.port }])).toEqual([
      ["web/s1", { address: "10.0.0.1", port: 8080 }],
      ["web/s2", { address: "127.0.0.1", port: 1 }],
      ["web/s3", { address: "fd00::7", port: 8080 }],
    ]);
  });
});

describe("serverStateFor", () => {
  it("keeps the saved state of servers that stay the same endpoint and drops every other line", () => {
    const dump = [
      "1",
      header,
      row("s1", "10.0.0.1", 8080),
      row("s2", "127.0.0.1", 1),
      row("s3", "fd00::7", 8080),
      row("s1", "10.0.0.1", 8080, "gone"),
    ].join("\n");
    expect(serverStateFor(dump, config)).toBe(
      ["1", header, row("s1", "10.0.0.1", 8080), row("s2", "127.0.0.1", 1), row("s3", "fd00::7", 8080), ""].join("\n"),
    );
  });

  it("drops a server whose port or address changed: HAProxy 2.6 would apply the saved port over the config's", () => {
    const dump = [
      "1",
      header,
      row("s1", "10.0.0.1", 9090),
      row("s2", "10.0.0.2", 8080),
      row("s3", "fd00::7", 8080),
    ].join("\n");
    expect(serverStateFor(dump, config)).toBe(["1", header, row("s3", "fd00::7", 8080), ""].join("\n"));
  });

  it("falls back to an empty state for a dump it does not understand", () => {
    expect(serverStateFor("", config)).toBe(EMPTY_SERVER_STATE);
    expect(serverStateFor("2\n# be_id be_name\n", config)).toBe(EMPTY_SERVER_STATE);
    expect(serverStateFor("1\n# be_id something_else\n", config)).toBe(EMPTY_SERVER_STATE);
  });
});
