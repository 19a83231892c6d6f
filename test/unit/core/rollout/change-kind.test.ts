import { describe, expect, it } from "vitest";
import { changeKind } from "../../../../shared/core/rollout/change-kind.js";

const config = (server: string, extra = "") => `global
    stats socket /run/haproxy/admin.sock mode 600 level admin

defaults http_defaults
    mode http
    timeout connect 5s${extra}

frontend http
    bind :80
    default_backend default_web_80

backend default_web_80 from http_defaults
    balance roundrobin
    ${server}
    server s2 127.0.0.1:1 disabled
`;

describe("changeKind", () => {
  it("calls byte-identical configs identical", () => {
    expect(changeKind(config("server s1 10.0.0.1:8080"), config("server s1 10.0.0.1:8080"))).toBe("identical");
  });

  it("calls a moved endpoint an endpoint change", () => {
    expect(changeKind(config("server s1 10.0.0.1:8080"), config("server s1 10.0.0.2:8080"))).toBe("endpoints");
    expect(changeKind(config("server s1 10.0.0.1:8080"), config("server s1 127.0.0.1:1 disabled"))).toBe("endpoints");
  });

  it("calls a changed setting, template line or server parameter structural", () => {
    expect(
      changeKind(config("server s1 10.0.0.1:8080"), config("server s1 10.0.0.1:8080", "\n    timeout client 5s")),
    ).toBe("structural");
    expect(changeKind(config("server s1 10.0.0.1:8080"), config("server s1 10.0.0.1:8080 check"))).toBe("structural");
  });
});
