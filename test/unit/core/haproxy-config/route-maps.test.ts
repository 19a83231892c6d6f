import { describe, expect, it } from "vitest";
import type { HttpRoute } from "../../../../shared/core/model/model.js";
import {
  DOMAINS_MAP,
  HOSTS_MAP,
  PATHS_MAP,
  parseMapLine,
  routeMapLines,
} from "../../../../shared/core/haproxy-config/route-maps.js";

const redirect = (r: HttpRoute) => `https_redirect_${r.redirectCode ?? 301}`;
const host = (name: string, backend: string, wildcard = false): HttpRoute => ({
  backend,
  match: { kind: "host", host: { name, wildcard } },
  action: "route",
});
const path = (prefix: string, backend: string, extra: Partial<HttpRoute> = {}): HttpRoute => ({
  backend,
  match: { kind: "path", prefix },
  action: "route",
  ...extra,
});

describe("routeMapLines", () => {
  it("puts exact hosts, domains and path prefixes in their maps; a prefix gets the slash it is looked up with", () => {
    const maps = routeMapLines(
      [
        path("/web", "default_web_80"),
        host("api.example.com", "shop_api_80"),
        host("example.com", "default_site_80", true),
        path("/", "default_root_80"),
        path("/shop/cart", "spare_2", { stripSegments: 2 }),
        path("/pay", "shop_pay_80", { action: "https-redirect", redirectCode: 308 }),
      ],
      redirect,
    );
    expect(maps.get(HOSTS_MAP)).toEqual(["api.example.com shop_api_80"]);
    expect(maps.get(DOMAINS_MAP)).toEqual([".example.com default_site_80"]);
    expect(maps.get(PATHS_MAP)).toEqual([
      "/ default_root_80",
      "/pay/ https_redirect_308",
      "/shop/cart/ spare_2|2",
      "/web/ default_web_80",
    ]);
  });

  it("lists domains longest first: map_end takes the first line that matches", () => {
    const maps = routeMapLines(
      [host("example.com", "a", true), host("b.example.com", "b", true), host("c.example.com", "c", true)],
      redirect,
    );
    expect(maps.get(DOMAINS_MAP)).toEqual([".b.example.com b", ".c.example.com c", ".example.com a"]);
  });
});

describe("parseMapLine", () => {
  it("takes what routeMapLines writes", () => {
    expect(parseMapLine(PATHS_MAP, "/shop/cart/ spare_2|2")).toEqual({ key: "/shop/cart/", value: "spare_2|2" });
    expect(parseMapLine(PATHS_MAP, "/ default_root_80")).toEqual({ key: "/", value: "default_root_80" });
    expect(parseMapLine(HOSTS_MAP, "api.example.com shop_api_80")).toEqual({
      key: "api.example.com",
      value: "shop_api_80",
    });
    expect(parseMapLine(DOMAINS_MAP, ".example.com a")).toEqual({ key: ".example.com", value: "a" });
  });

  it.each([
    [PATHS_MAP, "/web default_web_80", "does not fit"],
    [PATHS_MAP, "/web/;x/ a", "does not fit"],
    [HOSTS_MAP, ".example.com a", "does not fit"],
    [DOMAINS_MAP, "example.com a", "does not fit"],
    [HOSTS_MAP, "Api.example.com a", "does not fit"],
    [PATHS_MAP, "/web/ a b", "is not a backend name"],
    [PATHS_MAP, "/web/ a|3", "is not a backend name"],
    [PATHS_MAP, "/web/ %[req.hdr(x)]", "is not a backend name"],
    [PATHS_MAP, "/web/", "is not <key> <value>"],
  ])("refuses %s line %j", (map, line, why) => {
    expect(parseMapLine(map as typeof PATHS_MAP, line)).toContain(why);
  });
});
