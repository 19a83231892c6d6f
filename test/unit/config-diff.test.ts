import { describe, expect, it } from "vitest";
import { diffConfigs } from "../../shared/core/config-diff.js";

const base = `global
    master-worker
    stats socket /run/haproxy/admin.sock mode 600 level admin

defaults http_defaults
    mode http
    timeout connect 5s

frontend http
    bind :80
    default_backend default_page

backend default_web_80 from http_defaults
    balance roundrobin
    server s1 10.0.0.1:8080 check inter 2s
    server s2 127.0.0.1:1 disabled check inter 2s
    server s3 [fd00::1]:8080 check inter 2s

backend shop_api_8080 from http_defaults
    server s1 10.0.1.1:9000 check inter 2s cookie abcd1234
    server s2 10.0.1.2:9000 check inter 2s cookie 0123beef
`;

const edit = (from: string, to: string) => {
  expect(base).toContain(from);
  return base.replace(from, to);
};

describe("diffConfigs", () => {
  it("identical texts need nothing", () => {
    expect(diffConfigs(base, base)).toEqual({ kind: "identical" });
  });

  it("an address and port change is a runtime change", () => {
    const next = edit("    server s1 10.0.0.1:8080 check", "    server s1 10.0.0.9:8081 check");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: "default_web_80", server: "s1", address: "10.0.0.9", port: 8081, enabled: true }],
    });
  });

  it("enabling a disabled slot is a runtime change", () => {
    const next = edit("    server s2 127.0.0.1:1 disabled check", "    server s2 10.0.0.2:8080 check");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: "default_web_80", server: "s2", address: "10.0.0.2", port: 8080, enabled: true }],
    });
  });

  it("disabling a slot is a runtime change", () => {
    const next = edit("    server s1 10.0.0.1:8080 check", "    server s1 127.0.0.1:1 disabled check");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: "default_web_80", server: "s1", address: "127.0.0.1", port: 1, enabled: false }],
    });
  });

  it("IPv6 addresses come back without brackets, changes in several backends in file order", () => {
    const next = edit("[fd00::1]:8080", "[fd00::2:1]:8443").replace("10.0.1.2:9000", "10.0.1.3:9000");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [
        { backend: "default_web_80", server: "s3", address: "fd00::2:1", port: 8443, enabled: true },
        { backend: "shop_api_8080", server: "s2", address: "10.0.1.3", port: 9000, enabled: true },
      ],
    });
  });

  it("an IPv4 slot may move to IPv6 and back", () => {
    const next = edit("10.0.0.1:8080", "[2001:db8::7]:8080");
    expect(diffConfigs(base, next)).toMatchObject({ kind: "runtime", changes: [{ server: "s1", address: "2001:db8::7" }] });
    expect(diffConfigs(next, base)).toMatchObject({ kind: "runtime", changes: [{ server: "s1", address: "10.0.0.1" }] });
  });

  it("an added server needs a reload", () => {
    const next = edit("    server s3 [fd00::1]:8080 check inter 2s\n", "    server s3 [fd00::1]:8080 check inter 2s\n    server s4 10.0.0.4:8080 check inter 2s\n");
    const d = diffConfigs(base, next);
    expect(d.kind).toBe("reload");
    expect(d.kind === "reload" && d.reason).toMatch(/^line 18 differs: "" -> "    server s4 10\.0\.0\.4:8080/);
  });

  it("a changed server parameter needs a reload, even with an address change", () => {
    const cookie = diffConfigs(base, edit("10.0.1.1:9000 check inter 2s cookie abcd1234", "10.0.1.5:9000 check inter 2s cookie 99999999"));
    expect(cookie).toEqual({ kind: "reload", reason: 'line 20: server shop_api_8080/s1 parameters changed: "check inter 2s cookie abcd1234" -> "check inter 2s cookie 99999999"' });
    const inter = diffConfigs(base, edit("    server s1 10.0.0.1:8080 check inter 2s", "    server s1 10.0.0.1:8080 check inter 3s"));
    expect(inter.kind).toBe("reload");
  });

  it("a changed non-server line needs a reload, with its line number and content", () => {
    const d = diffConfigs(base, edit("    balance roundrobin", "    balance leastconn"));
    expect(d).toEqual({ kind: "reload", reason: 'line 14 differs: "    balance roundrobin" -> "    balance leastconn"' });
  });

  it("an added backend needs a reload", () => {
    const next = `${base}\nbackend extra_80 from http_defaults\n    server s1 10.0.2.1:80 check inter 2s\n`;
    expect(diffConfigs(base, next)).toMatchObject({ kind: "reload", reason: expect.stringMatching(/^line 23 added: "backend extra_80 from http_defaults"$/) });
  });

  it("a removed trailing line needs a reload", () => {
    expect(diffConfigs(base, base.replace(/\n$/, ""))).toMatchObject({ kind: "reload", reason: expect.stringMatching(/^line 22 removed: ""$/) });
  });

  it("reordered servers need a reload", () => {
    const next = edit(
      "    server s1 10.0.1.1:9000 check inter 2s cookie abcd1234\n    server s2 10.0.1.2:9000 check inter 2s cookie 0123beef",
      "    server s2 10.0.1.2:9000 check inter 2s cookie 0123beef\n    server s1 10.0.1.1:9000 check inter 2s cookie abcd1234",
    );
    expect(diffConfigs(base, next)).toEqual({ kind: "reload", reason: "line 20: server shop_api_8080/s1 replaced by s2" });
  });

  it("server lines outside backend sections are never changed at runtime", () => {
    const listen = "listen stats\n    server s1 10.0.0.1:80\n";
    expect(diffConfigs(listen, listen.replace("10.0.0.1", "10.0.0.2")).kind).toBe("reload");
  });

  it("server lines that are not our template's shape need a reload", () => {
    // A hostname, different indentation, a trailing space: not recognised, so never applied at runtime.
    for (const to of ["    server s1 web.local:8080 check inter 2s", "  server s1 10.0.0.2:8080 check inter 2s", "    server s1 10.0.0.2:8080 check inter 2s "]) {
      expect(diffConfigs(base, edit("    server s1 10.0.0.1:8080 check inter 2s", to)).kind).toBe("reload");
    }
  });

  it("long lines are truncated in the reason", () => {
    const long = `    http-request set-header X-Long ${"x".repeat(500)}`;
    const d = diffConfigs(base, edit("    balance roundrobin", long));
    expect(d.kind === "reload" && d.reason.length).toBeLessThan(260);
  });
});
