import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { diffConfigs as diffParsed } from "../../../../shared/core/haproxy-config/diff.js";
import { parseServer, sectionOf } from "../../../../shared/core/haproxy-config/server-line.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { parseSnapshot } from "../../../../shared/core/kubernetes/snapshot.js";
import { parsed } from "../../../support/haproxy-config.js";

/** The diff of two texts, each parsed as the agent parses them. */
const diffConfigs = (from: string, to: string) => diffParsed(parsed(from), parsed(to));

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
      adds: [],
      // The backend's slots free before and after, for make before break (core/haproxy-config/runtime-plan.ts).
      spare: new Map([[web, [free("s2"), free("s4")]]]),
      emptied: new Set(),
    });
  });

  it("enabling a disabled slot is a runtime change", () => {
    const next = edit("    server s2 127.0.0.1:1 disabled", "    server s2 10.0.0.2:8080");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: web, server: "s2", from: off, to: on("10.0.0.2", 8080) }],
      adds: [],
      spare: new Map([[web, [free("s4")]]]),
      emptied: new Set(),
    });
  });

  it("disabling a slot is a runtime change", () => {
    const next = edit("    server s1 10.0.0.1:8080\n", "    server s1 127.0.0.1:1 disabled\n");
    expect(diffConfigs(base, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: web, server: "s1", from: on("10.0.0.1", 8080), to: off }],
      adds: [],
      spare: new Map([[web, [free("s2"), free("s4")]]]),
      emptied: new Set(),
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
      adds: [],
      // shop_api_8080 has no free slot: an in-place move there cannot be bridged.
      spare: new Map([
        [web, [free("s2"), free("s4")]],
        ["shop_api_8080", []],
      ]),
      emptied: new Set(),
    });
  });

  it("names a backend the change leaves with no enabled server, and only such a backend", () => {
    const next = edit("    server s1 10.0.0.1:8080\n", "    server s1 127.0.0.1:1 disabled\n")
      .replace("    server s3 [fd00::1]:8080\n", "    server s3 127.0.0.1:1 disabled\n")
      .replace("10.0.1.2:9000", "10.0.1.3:9000");
    expect(diffConfigs(base, next)).toMatchObject({ kind: "runtime", emptied: new Set([web]) });
    expect(diffConfigs(next, base)).toMatchObject({ kind: "runtime", emptied: new Set() });
  });

  it("an IPv4 slot may move to IPv6 and back", () => {
    const next = edit("10.0.0.1:8080", "[2001:db8::7]:8080");
    expect(diffConfigs(base, next)).toMatchObject({
      kind: "runtime",
      changes: [{ server: "s1", to: { address: "2001:db8::7" } }],
      adds: [],
    });
    expect(diffConfigs(next, base)).toMatchObject({
      kind: "runtime",
      changes: [{ server: "s1", to: { address: "10.0.0.1" } }],
      adds: [],
    });
  });

  it("a server appended to a backend that balances dynamically is added at runtime, with its default-server", () => {
    const grown = base
      .replace("    balance roundrobin\n", "    balance roundrobin\n    default-server maxconn 50 send-proxy\n")
      .replace(
        "    server s4 127.0.0.1:1 disabled\n",
        "    server s4 127.0.0.1:1 disabled\n    server s5 10.0.0.4:8080\n    server s6 127.0.0.1:1 disabled\n",
      );
    const before = base.replace(
      "    balance roundrobin\n",
      "    balance roundrobin\n    default-server maxconn 50 send-proxy\n",
    );
    expect(diffConfigs(before, grown)).toEqual({
      kind: "runtime",
      changes: [],
      adds: [
        { backend: web, server: "s5", to: on("10.0.0.4", 8080), params: "maxconn 50 send-proxy" },
        { backend: web, server: "s6", to: off, params: "maxconn 50 send-proxy" },
      ],
      spare: new Map(),
      emptied: new Set(),
    });
  });

  it.each([
    [
      "a static algorithm",
      "    balance roundrobin\n",
      "    balance source\n",
      /balances by source, not a dynamic algorithm/,
    ],
    [
      "cookies",
      "    balance roundrobin\n",
      "    balance roundrobin\n    cookie SERVERID insert indirect nocache\n",
      /sets cookies/,
    ],
    [
      "health checks",
      "    balance roundrobin\n",
      "    balance roundrobin\n    default-server check inter 2s\n",
      /default-server has check/,
    ],
  ])("a server appended to a backend with %s needs a reload", (_, from, to, why) => {
    const before = edit(from, to);
    const next = before.replace(
      "    server s4 127.0.0.1:1 disabled\n",
      "    server s4 127.0.0.1:1 disabled\n    server s5 10.0.0.4:8080\n",
    );
    const d = diffConfigs(before, next);
    expect(d.kind === "reload" && d.reason).toMatch(
      /^server default_web_80\/s5 is new and cannot be added at runtime: /,
    );
    expect(d.kind === "reload" && d.reason).toMatch(why);
  });

  it("a server line added anywhere else needs a reload", () => {
    const first = edit("    server s1 10.0.0.1:8080\n", "    server s0 10.0.0.5:8080\n    server s1 10.0.0.1:8080\n");
    expect(diffConfigs(base, first)).toEqual({
      kind: "reload",
      reason: "line 15: server default_web_80/s1 replaced by s0",
    });
    const cookies = edit(
      "    server s2 10.0.1.2:9000 cookie 0123beef\n",
      "    server s2 10.0.1.2:9000 cookie 0123beef\n    server s3 10.0.1.3:9000\n",
    );
    expect(diffConfigs(base, cookies)).toEqual({
      kind: "reload",
      reason:
        "server shop_api_8080/s3 is new and cannot be added at runtime: it balances by no stated algorithm, not a dynamic algorithm",
    });
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
    parseSnapshot(readFileSync(join(import.meta.dirname, "..", "..", "..", "golden", file), "utf8"));
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
    const text = readFileSync(join(import.meta.dirname, "..", "..", "..", "golden", "settings.yaml"), "utf8");
    const before = renderSnapshot(parseSnapshot(text), options, renderer).config;
    const after = renderSnapshot(
      parseSnapshot(text.replace("10.0.2.1", "10.0.2.9").replace("10.0.4.1", "10.0.4.7")),
      options,
      renderer,
    ).config;
    expect(before).toContain("    default-server check inter 2s maxconn 50 send-proxy-v2 check-send-proxy\n");
    const diff = diffConfigs(before, after);
    expect(diff.kind).toBe("runtime");
    const added =
      diff.kind === "runtime"
        ? diff.changes.filter((c) => c.to.enabled).map((c) => `${c.backend} ${c.to.address}`)
        : [];
    expect(added.sort()).toEqual(["shop_api_80 10.0.2.9", "shop_legacy_80 10.0.4.7"]);
  });
});

/**
 * The walk over every line of both configs that diffConfigs did before it walked only the sections
 * that differ: the oracle of the tests below, which must agree with it on every verdict, change,
 * added server, spare slot and reason. Server lines appended to a backend's servers are added
 * (this file's configs balance roundrobin with no default-server); any other line added or
 * removed is a reload, named by pairing the lines by index.
 */
function wholeTextWalk(oldText: string, newText: string) {
  if (oldText === newText) return { kind: "identical" };
  const a = oldText.split("\n");
  const b = newText.split("\n");
  const changes: unknown[] = [];
  const adds: unknown[] = [];
  const spare = new Map<string, unknown[]>();
  let backend: string | null = null;
  let dynamic = false;
  let spareHere: Array<{ server: string; address: string; port: number; enabled: boolean }> = [];
  let changesBefore = 0;
  const show = (line: string, max = 100) => JSON.stringify(line.length > max ? `${line.slice(0, max)}…` : line);
  const closeSection = () => {
    if (backend !== null && changes.length > changesBefore) spare.set(backend, spareHere);
    spareHere = [];
    changesBefore = changes.length;
  };
  const isServer = (line: string | undefined) => line?.startsWith("    server ") === true;
  let i = 0;
  let j = 0;
  for (; i < a.length || j < b.length; i++, j++) {
    const [oldLine, newLine, n] = [a[i], b[j], i + 1];
    if (oldLine !== undefined && oldLine === newLine) {
      const s = sectionOf(oldLine);
      if (s !== undefined) {
        closeSection();
        backend = s;
        dynamic = false;
      } else if (backend !== null) {
        if (oldLine === "    balance roundrobin") dynamic = true;
        const p = parseServer(oldLine);
        if (p && !p.enabled && p.params === "")
          spareHere.push({ server: p.server, address: p.address, port: p.port, enabled: false });
      }
      continue;
    }
    const added = newLine === undefined ? undefined : parseServer(newLine);
    if (backend !== null && added && isServer(a[i - 1]) && !isServer(oldLine)) {
      if (!dynamic || added.params !== "") return pairWalk(a, b);
      adds.push({
        backend,
        server: added.server,
        to: { address: added.address, port: added.port, enabled: added.enabled },
        params: "",
      });
      if (!added.enabled)
        spareHere.push({ server: added.server, address: added.address, port: added.port, enabled: false });
      i--;
      continue;
    }
    const before = oldLine === undefined ? undefined : parseServer(oldLine);
    const after = newLine === undefined ? undefined : parseServer(newLine);
    const inPlace =
      backend !== null && before && after && before.server === after.server && before.params === after.params;
    if (!inPlace && a.length - i !== b.length - j) return pairWalk(a, b);
    if (backend === null || !before || !after)
      return { kind: "reload", reason: `line ${n} differs: ${show(oldLine!)} -> ${show(newLine!)}` };
    if (before.server !== after.server)
      return { kind: "reload", reason: `line ${n}: server ${backend}/${before.server} replaced by ${after.server}` };
    if (before.params !== after.params)
      return {
        kind: "reload",
        reason: `line ${n}: server ${backend}/${before.server} parameters changed: ${show(before.params.trim(), 60)} -> ${show(after.params.trim(), 60)}`,
      };
    changes.push({
      backend,
      server: after.server,
      from: { address: before.address, port: before.port, enabled: before.enabled },
      to: { address: after.address, port: after.port, enabled: after.enabled },
    });
  }
  closeSection();
  return { kind: "runtime", changes, adds, spare, emptied: emptiedOf(newText, [...changes, ...adds]) };

  /** Lines added or removed: the first line where an index-by-index pairing stops. */
  function pairWalk(a: string[], b: string[]) {
    for (let k = 0; k < Math.max(a.length, b.length); k++) {
      const [oldLine, newLine, n] = [a[k], b[k], k + 1];
      if (oldLine === undefined) return { kind: "reload", reason: `line ${n} added: ${show(newLine!)}` };
      if (newLine === undefined) return { kind: "reload", reason: `line ${n} removed: ${show(oldLine)}` };
      if (oldLine === newLine) continue;
      const before = parseServer(oldLine);
      const after = parseServer(newLine);
      if (sectionAt(a, k) === null || !before || !after)
        return { kind: "reload", reason: `line ${n} differs: ${show(oldLine)} -> ${show(newLine)}` };
      if (before.server !== after.server)
        return {
          kind: "reload",
          reason: `line ${n}: server ${sectionAt(a, k)}/${before.server} replaced by ${after.server}`,
        };
      if (before.params !== after.params)
        return {
          kind: "reload",
          reason: `line ${n}: server ${sectionAt(a, k)}/${before.server} parameters changed: ${show(before.params.trim(), 60)} -> ${show(after.params.trim(), 60)}`,
        };
    }
    throw new Error("configs of different lengths always differ in a line");
  }
}

/** The backends changed or added to that `text` leaves with no enabled server, read from all of its backends. */
function emptiedOf(text: string, touched: unknown[]): Set<string> {
  const backends = parsed(text).backends;
  return new Set(
    (touched as Array<{ backend: string }>)
      .map((t) => t.backend)
      .filter((name) => backends.get(name)!.every((s) => !s.enabled)),
  );
}

/** The backend whose section holds line k. */
function sectionAt(lines: string[], k: number): string | null {
  for (let i = k; i >= 0; i--) {
    const s = sectionOf(lines[i]!);
    if (s !== undefined) return s;
  }
  return null;
}

describe("diffConfigs walks only the sections that differ", () => {
  /** A config of `n` backends of four slots each, the last of every backend free; large enough for the block compares. */
  const big = (n: number) => {
    let text = base.slice(0, base.indexOf("backend "));
    for (let i = 0; i < n; i++) {
      text += `backend svc_${i}_80 from http_defaults\n    balance roundrobin\n`;
      for (let s = 1; s <= 3; s++) text += `    server s${s} 10.${i >> 8}.${i & 255}.${s}:8080\n`;
      text += "    server s4 127.0.0.1:1 disabled\n\n";
    }
    return text;
  };
  const config = big(3000);
  const at = (text: string, needle: string, by: string) => {
    expect(text).toContain(needle);
    return text.replace(needle, by);
  };

  const cases: Array<[string, string]> = [
    ["a slot of the first backend", at(config, "server s1 10.0.0.1:8080", "server s1 10.9.9.9:8080")],
    ["a slot of the last backend", at(config, "server s3 10.11.183.3:8080", "server s3 10.9.9.9:81")],
    [
      "the last slot of the config freed",
      at(config, "server s3 10.11.183.3:8080\n", "server s3 10.11.183.3:8080 disabled\n"),
    ],
    [
      "slots of two distant backends",
      at(
        at(config, "server s2 10.0.7.2:8080", "server s2 10.9.9.9:8080"),
        "server s1 10.10.0.1:8080",
        "server s1 10.9.9.8:80",
      ),
    ],
    [
      "a free slot taken",
      at(
        config,
        "backend svc_1500_80 from http_defaults\n    balance roundrobin\n    server s1 10.5.220.1:8080\n    server s2 10.5.220.2:8080\n    server s3 10.5.220.3:8080\n    server s4 127.0.0.1:1 disabled",
        "backend svc_1500_80 from http_defaults\n    balance roundrobin\n    server s1 10.5.220.1:8080\n    server s2 10.5.220.2:8080\n    server s3 10.5.220.3:8080\n    server s4 10.9.9.9:8080",
      ),
    ],
    [
      "a free slot taken and a server appended after the backend's last",
      at(
        config,
        "    server s3 10.0.9.3:8080\n    server s4 127.0.0.1:1 disabled\n",
        "    server s3 10.0.9.3:8080\n    server s4 10.9.9.9:8080\n    server s5 127.0.0.1:1 disabled\n",
      ),
    ],
    ["a backend renamed", at(config, "backend svc_2000_80 ", "backend svc_2000_81 ")],
    [
      "a line added in a backend",
      at(
        config,
        "    server s4 127.0.0.1:1 disabled\n\nbackend svc_9_80",
        "    server s4 127.0.0.1:1 disabled\n    server s5 127.0.0.1:1 disabled\n\nbackend svc_9_80",
      ),
    ],
    [
      "a line removed",
      at(config, "    balance roundrobin\n    server s1 10.0.42.1:8080\n", "    server s1 10.0.42.1:8080\n"),
    ],
    ["a global line changed", at(config, "    master-worker\n", "    master-worker\n    nbthread 2\n")],
    ["the first character", `G${config.slice(1)}`],
    ["the last line, without a newline after it", `${config}    server s9 10.0.0.1:1`],
    [
      "a blank line between backends removed",
      at(config, "disabled\n\nbackend svc_700_80", "disabled\nbackend svc_700_80"),
    ],
    ["server parameters changed", at(config, "server s2 10.3.0.2:8080", "server s2 10.3.0.2:8080 weight 5")],
    ["a whole backend appended", `${config}backend extra from http_defaults\n    server s1 10.0.0.1:80\n`],
    ["identical", config],
  ];
  it.each(cases)("%s: the same verdict as a walk over every line", (_, next) => {
    expect(diffConfigs(config, next)).toEqual(wholeTextWalk(config, next));
    expect(diffConfigs(next, config)).toEqual(wholeTextWalk(next, config));
  });

  it("any edits of lines anywhere: the same verdict as a walk over every line (property)", () => {
    const small = big(40);
    const lines = small.split("\n");
    let emptiedSeen = 0;
    const edit = fc.record({
      line: fc.nat({ max: lines.length - 1 }),
      how: fc.constantFrom("address", "free", "free backend", "take", "params", "delete", "insert", "header", "blank"),
    });
    /** Every server line of the section that holds line k, freed: a backend left with none ready. */
    const freeSection = (out: string[], k: number) => {
      let from = k;
      while (from > 0 && sectionOf(out[from]!) === undefined) from--;
      for (let i = from + 1; i < out.length && sectionOf(out[i]!) === undefined; i++)
        out[i] = out[i]!.replace(/ 10\.\d+\.\d+\.\d+:\d+$/, " 127.0.0.1:1 disabled");
    };
    const apply = (text: string[], { line, how }: { line: number; how: string }) => {
      const out = [...text];
      const l = out[line] ?? "";
      if (how === "address") out[line] = l.replace(/ 10\.\d+\.\d+\.\d+:/, " 10.200.200.200:");
      else if (how === "free") out[line] = l.replace(/ 10\.\d+\.\d+\.\d+:\d+$/, " 127.0.0.1:1 disabled");
      else if (how === "free backend") freeSection(out, line);
      else if (how === "take") out[line] = l.replace(" 127.0.0.1:1 disabled", " 10.1.2.3:8080");
      else if (how === "params") out[line] = `${l} weight 2`;
      else if (how === "delete") out.splice(line, 1);
      else if (how === "insert") out.splice(line, 0, "    server s9 10.0.0.9:80");
      else if (how === "header") out[line] = l.startsWith("backend ") ? l.replace("_80 ", "_81 ") : l;
      else out[line] = "";
      return out;
    };
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 4 }), (edits) => {
        const next = edits.reduce(apply, lines).join("\n");
        const diff = diffConfigs(small, next);
        expect(diff).toEqual(wholeTextWalk(small, next));
        if (diff.kind === "runtime") emptiedSeen += diff.emptied.size;
      }),
      { numRuns: 300 },
    );
    // The draws do leave backends with no server ready, so the emptied backends are compared too.
    expect(emptiedSeen).toBeGreaterThan(0);
  });

  it("a runtime change in one backend of thousands reports that backend's changes and free slots only", () => {
    const next = at(config, "server s2 10.3.0.2:8080", "server s2 10.9.9.9:8080");
    expect(diffConfigs(config, next)).toEqual({
      kind: "runtime",
      changes: [{ backend: "svc_768_80", server: "s2", from: on("10.3.0.2", 8080), to: on("10.9.9.9", 8080) }],
      adds: [],
      spare: new Map([["svc_768_80", [free("s4")]]]),
      emptied: new Set(),
    });
  });
});
