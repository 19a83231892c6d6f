import { describe, expect, it } from "vitest";
import {
  gatewayMapLineError,
  gatewayMapPath,
  HEADER_VALUE_PATTERN,
  headerMapKey,
  isGatewayMapKey,
  isGatewayMapPath,
} from "../../../../shared/core/haproxy-config/gateway-maps.js";
import {
  patternFileKind,
  renderPatternSection,
  splitConfig,
} from "../../../../shared/core/haproxy-config/pattern-files.js";

describe("Gateway match maps", () => {
  it("are four files per listener port, known to the file section as maps", () => {
    expect(gatewayMapPath(8081, "exact")).toBe("maps/gw.8081.exact.map");
    expect(isGatewayMapPath("maps/gw.8081.prefix.map")).toBe(true);
    expect(gatewayMapPath(8081, "header-prefix")).toBe("maps/gw.8081.header-prefix.map");
    expect(isGatewayMapPath("maps/gw.8081.header-exact.map")).toBe(true);
    for (const bad of ["maps/gw.0.exact.map", "maps/gw.65536.exact.map", "maps/gw.80.other.map", "maps/gw.80.exact"])
      expect(isGatewayMapPath(bad)).toBe(false);
    expect(patternFileKind("maps/gw.80.exact.map")).toBe("map");
  });

  it("hold a host (or none) and a path as key, and a rule's base as value", () => {
    expect(isGatewayMapKey("shop.example/cart/")).toBe(true);
    expect(isGatewayMapKey("/a/%2F:b@c+d=e,f~g")).toBe(true);
    // A wildcard's labels after `*.` (map-plan.ts looks them up with the host's last labels).
    expect(isGatewayMapKey("*.example/")).toBe(true);
    for (const bad of [
      "shop.example",
      "Shop.example/",
      "/a b",
      "/a;b",
      "/a'b",
      "/a#b",
      "*example/",
      "a.*.example/",
      "*.*.example/",
      "*/",
      "/a(b)",
    ])
      expect(isGatewayMapKey(bad)).toBe(false);
    const prefix = gatewayMapPath(80, "prefix");
    expect(gatewayMapLineError(prefix, "a.example/x/ 1048576")).toBeNull();
    expect(gatewayMapLineError(prefix, "a.example/x 1048576")).toMatch(/final \//);
    expect(gatewayMapLineError(gatewayMapPath(80, "exact"), "a.example/x 1048576")).toBeNull();
    expect(gatewayMapLineError(prefix, "/x/ gw:default:web:80")).toMatch(/not a rule's number/);
    expect(gatewayMapLineError(prefix, "/x/")).toMatch(/not <key> <rule>/);
  });

  it("travel in the file section, where a line outside their grammar is an error, never a file", () => {
    const path = gatewayMapPath(8081, "exact");
    const good = `x\n${renderPatternSection([{ path, entries: ["a.example/x 0", "/y 1048576"] }])}`;
    expect(splitConfig(good)).toEqual({ head: "x\n", files: new Map([[path, ["a.example/x 0", "/y 1048576"]]]) });
    const bad = `x\n${renderPatternSection([{ path, entries: ["/a;show 0"] }])}`;
    expect(splitConfig(bad)).toEqual({
      error: `pattern section line 2: "/a;show 0" key "/a;show" is not a host and a path`,
    });
  });

  it("hold a header's lower-case name and value before the host and path, and no value that could reach past them", () => {
    expect(headerMapKey("X-Version", "v2.1", "shop.example/cart/")).toBe("x-version=v2.1|shop.example/cart/");
    expect(headerMapKey("v", "a=b,c@d~e+f", "/")).toBe("v=a=b,c@d~e+f|/");
    for (const [name, value] of [
      ["v", "two words"],
      ["v", "a|shop.example/"],
      ["v", ""],
      ["v", "x".repeat(129)],
      ["v", "a;b"],
      ["v_1", "a"],
      ["v", "a#b"],
    ] as const)
      expect(headerMapKey(name, value, "/x")).toBeNull();
    expect(headerMapKey("v", "a", "Shop/")).toBeNull();
    // The frontend tests a request's value with the same grammar before it looks it up.
    expect(new RegExp(HEADER_VALUE_PATTERN).test("a|shop.example/")).toBe(false);
    const prefix = gatewayMapPath(80, "header-prefix");
    expect(gatewayMapLineError(prefix, "v=2|a.example/x/ 1048576")).toBeNull();
    expect(gatewayMapLineError(prefix, "v=2|a.example/x 1048576")).toMatch(/final \//);
    expect(gatewayMapLineError(prefix, "a.example/x/ 1048576")).toMatch(/not a header, a host and a path/);
    expect(gatewayMapLineError(prefix, "V=2|/x/ 0")).toMatch(/not a header/);
    expect(gatewayMapLineError(prefix, "v=2|x|/x/ 0")).toMatch(/not a header/);
    expect(gatewayMapLineError(gatewayMapPath(80, "exact"), "v=2|/x 0")).toMatch(/not a host and a path/);
  });
});
