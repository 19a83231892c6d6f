import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTemplates } from "../../../shared/adapters/templates.js";
import { diffConfigs, parseServer, sectionOf } from "../../../shared/core/config-diff.js";
import { parseRenderOptions } from "../../../shared/core/options.js";
import { renderSnapshot } from "../../../shared/core/pipeline.js";
import { Renderer } from "../../../shared/core/render.js";
import { parseSnapshot } from "../../../shared/core/snapshot.js";

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
    server s1 10.0.0.1:8080
    server s2 127.0.0.1:1 disabled
    server s3 [fd00::1]:8080
    server s4 127.0.0.1:1 disabled

backend shop_api_8080 from http_defaults
    server s1 10.0.1.1:9000 cookie abcd1234
    server s2 10.0.1.2:9000 cookie 0123beef
`;

const web = "default_web_80";
const free = (server: string) => ({ server, address: "127.0.0.1", port: 1, enabled: false });
const on = (address: string, port: number) => ({ address, port, enabled: true });
const off = { address: "127.0.0.1", port: 1, enabled: false };

const edit = (from: string, to: string) => {
  expect(base).toContain(from);
  return base.replace(from, to);
};

describe("diffConfigs", () => {
  it("identical texts need nothing", () => {
    expect(diffConfigs(base, base)).toEqual({ kind: "identical" });
  });

  it("an address and port change is a runtime change", () => {
    const next = edit("    server s1 10.0.0.1:8080\n", "    server s1 10.0.0.9:8081\n");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: web, server: "s1", from: on("10.0.0.1", 8080), to: on("10.0.0.9", 8081) }],
      // The backend's slots free before and after, for make before break (core/runtime-plan.ts).
      spare: new Map([[web, [free("s2"), free("s4")]]]),
    });
  });

  it("enabling a disabled slot is a runtime change", () => {
    const next = edit("    server s2 127.0.0.1:1 disabled", "    server s2 10.0.0.2:8080");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: web, server: "s2", from: off, to: on("10.0.0.2", 8080) }],
      spare: new Map([[web, [free("s4")]]]),
    });
  });

  it("disabling a slot is a runtime change", () => {
    const next = edit("    server s1 10.0.0.1:8080\n", "    server s1 127.0.0.1:1 disabled\n");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: web, server: "s1", from: on("10.0.0.1", 8080), to: off }],
      spare: new Map([[web, [free("s2"), free("s4")]]]),
    });
  });

  it("IPv6 addresses come back without brackets, changes in several backends in file order", () => {
    const next = edit("[fd00::1]:8080", "[fd00::2:1]:8443").replace("10.0.1.2:9000", "10.0.1.3:9000");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [
        { backend: web, server: "s3", from: on("fd00::1", 8080), to: on("fd00::2:1", 8443) },
        { backend: "shop_api_8080", server: "s2", from: on("10.0.1.2", 9000), to: on("10.0.1.3", 9000) },
      ],
      // shop_api_8080 has no free slot: an in-place move there cannot be bridged.
      spare: new Map([
        [web, [free("s2"), free("s4")]],
        ["shop_api_8080", []],
      ]),
    });
  });

  it("an IPv4 slot may move to IPv6 and back", () => {
    const next = edit("10.0.0.1:8080", "[2001:db8::7]:8080");
    expect(diffConfigs(base, next)).toMatchObject({
      kind: "runtime",
      changes: [{ server: "s1", to: { address: "2001:db8::7" } }],
    });
    expect(diffConfigs(next, base)).toMatchObject({
      kind: "runtime",
      changes: [{ server: "s1", to: { address: "10.0.0.1" } }],
    });
  });

  it("an added server needs a reload", () => {
    const next = edit(
      "    server s4 127.0.0.1:1 disabled\n",
      "    server s4 127.0.0.1:1 disabled\n    server s5 10.0.0.4:8080\n",
    );
    const d = diffConfigs(base, next);
    expect(d.kind).toBe("reload");
    expect(d.kind === "reload" && d.reason).toMatch(/^line 19 differs: "" -> " {4}server s5 10\.0\.0\.4:8080/);
  });

  it("a changed server parameter needs a reload, even with an address change", () => {
    const cookie = diffConfigs(base, edit("10.0.1.1:9000 cookie abcd1234", "10.0.1.5:9000 cookie 99999999"));
    expect(cookie).toEqual({
      kind: "reload",
      reason: 'line 21: server shop_api_8080/s1 parameters changed: "cookie abcd1234" -> "cookie 99999999"',
    });
    const inter = diffConfigs(
      base,
      edit("    server s1 10.0.0.1:8080\n", "    server s1 10.0.0.1:8080 check inter 3s\n"),
    );
    expect(inter.kind).toBe("reload");
  });

  it("a changed non-server line needs a reload, with its line number and content", () => {
    const d = diffConfigs(base, edit("    balance roundrobin", "    balance leastconn"));
    expect(d).toEqual({
      kind: "reload",
      reason: 'line 14 differs: "    balance roundrobin" -> "    balance leastconn"',
    });
  });

  it("an added backend needs a reload", () => {
    const next = `${base}\nbackend extra_80 from http_defaults\n    server s1 10.0.2.1:80\n`;
    expect(diffConfigs(base, next)).toMatchObject({
      kind: "reload",
      reason: expect.stringMatching(/^line 24 added: "backend extra_80 from http_defaults"$/),
    });
  });

  it("a removed trailing line needs a reload", () => {
    expect(diffConfigs(base, base.replace(/\n$/, ""))).toMatchObject({
      kind: "reload",
      reason: expect.stringMatching(/^line 23 removed: ""$/),
    });
  });

  it("reordered servers need a reload", () => {
    const next = edit(
      "    server s1 10.0.1.1:9000 cookie abcd1234\n    server s2 10.0.1.2:9000 cookie 0123beef",
      "    server s2 10.0.1.2:9000 cookie 0123beef\n    server s1 10.0.1.1:9000 cookie abcd1234",
    );
    expect(diffConfigs(base, next)).toEqual({
      kind: "reload",
      reason: "line 21: server shop_api_8080/s1 replaced by s2",
    });
  });

  it("server lines outside backend sections are never changed at runtime", () => {
    const listen = "listen stats\n    server s1 10.0.0.1:80\n";
    expect(diffConfigs(listen, listen.replace("10.0.0.1", "10.0.0.2")).kind).toBe("reload");
  });

  it("server lines that are not our template's shape need a reload", () => {
    // A hostname, different indentation, a trailing space: not recognised, so never applied at runtime.
    for (const to of [
      "    server s1 web.local:8080\n",
      "  server s1 10.0.0.2:8080\n",
      "    server s1 10.0.0.2:8080 \n",
    ]) {
      expect(diffConfigs(base, edit("    server s1 10.0.0.1:8080\n", to)).kind).toBe("reload");
    }
  });

  it("long lines are truncated in the reason", () => {
    const long = `    http-request set-header X-Long ${"x".repeat(500)}`;
    const d = diffConfigs(base, edit("    balance roundrobin", long));
    expect(d.kind === "reload" && d.reason.length).toBeLessThan(260);
  });
});

describe("the contract between the built-in templates and the agent", () => {
  // The agent changes slots through the runtime API only for server lines this grammar reads;
  // a template edit that changes their shape must fail here, not turn every change into a reload.
  const golden = (file: string) =>
    parseSnapshot(readFileSync(join(import.meta.dirname, "..", "..", "golden", file), "utf8"));
  it.each([
    ["plain", "mixed.yaml", {}],
    ["TLS, TCP and cookies", "mixed.yaml", { tcpServices: "mysql:3306", sslCert: "/etc/haproxy/certs/lb.pem" }],
    // Per-server settings (maxconn, protocols, PROXY protocol) go on default-server lines, not server lines.
    ["per-Service settings", "settings.yaml", { tcpServices: "mysql:3306", sslCert: "/etc/haproxy/certs/lb.pem" }],
  ])("every server line of a backend parses (%s)", (_name, file, options) => {
    const { config } = renderSnapshot(golden(file), parseRenderOptions(options), new Renderer(loadTemplates()));
    let backend: string | null = null;
    let servers = 0;
    let free = 0;
    for (const line of config.split("\n")) {
      const section = sectionOf(line);
      if (section !== undefined) backend = section;
      else if (backend !== null && line.trimStart().startsWith("server ")) {
        const s = parseServer(line);
        expect(s, line).toBeDefined();
        servers++;
        if (!s!.enabled) free++;
      }
    }
    expect(servers).toBeGreaterThan(10);
    expect(free).toBeGreaterThan(0);
  });

  it("an endpoint moving in a backend with per-Service settings is a runtime change", () => {
    const options = parseRenderOptions({ tcpServices: "mysql:3306", sslCert: "/etc/haproxy/certs/lb.pem" });
    const renderer = new Renderer(loadTemplates());
    const text = readFileSync(join(import.meta.dirname, "..", "..", "golden", "settings.yaml"), "utf8");
    const before = renderSnapshot(parseSnapshot(text), options, renderer).config;
    const after = renderSnapshot(
      parseSnapshot(text.replace("10.0.2.1", "10.0.2.9").replace("10.0.4.1", "10.0.4.7")),
      options,
      renderer,
    ).config;
    expect(before).toContain("    default-server maxconn 50 send-proxy-v2 check-send-proxy\n");
    const diff = diffConfigs(before, after);
    expect(diff.kind).toBe("runtime");
    const added =
      diff.kind === "runtime"
        ? diff.changes.filter((c) => c.to.enabled).map((c) => `${c.backend} ${c.to.address}`)
        : [];
    expect(added.sort()).toEqual(["shop_api_80 10.0.2.9", "shop_legacy_80 10.0.4.7"]);
  });
});
