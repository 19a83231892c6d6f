import { describe, expect, it } from "vitest";
import { splitConfig, PATTERN_SECTION } from "../../../../shared/core/haproxy-config/pattern-files.js";
import { parseServiceMapLine, SERVICE_MAP } from "../../../../shared/core/haproxy-config/service-map.js";

// The agent turns these lines into label values (servicelb_backend_info): anything but a backend
// name and a Service port is refused before it reaches HAProxy or a scrape.

describe("the Service map", () => {
  it("reads a backend and the Service port it serves", () => {
    expect(parseServiceMapLine("spare_3 shop/api/8080")).toEqual({
      backend: "spare_3",
      namespace: "shop",
      service: "api",
      port: 8080,
    });
  });

  it.each([
    ["no value", "spare_3"],
    ["a port out of range", "spare_3 shop/api/65536"],
    ["port 0", "spare_3 shop/api/0"],
    ["a missing part", "spare_3 shop/api"],
    ["a label quote", 'spare_3 shop/a"pi/80'],
    ["an upper-case name", "spare_3 Shop/api/80"],
    ["a backend name with a space", "spare 3 shop/api/80"],
  ])("refuses %s", (_, line) => {
    expect(typeof parseServiceMapLine(line)).toBe("string");
  });

  it("is a file of the config's pattern section, its lines checked like every other's", () => {
    const ok = splitConfig(`global\n${PATTERN_SECTION}\n#> ${SERVICE_MAP}\n#| spare_1 shop/api/80\n`);
    expect(ok).toEqual({ head: "global\n", files: new Map([[SERVICE_MAP, ["spare_1 shop/api/80"]]]) });
    const bad = splitConfig(`global\n${PATTERN_SECTION}\n#> ${SERVICE_MAP}\n#| spare_1 shop/api\n`);
    expect(bad).toHaveProperty("error");
  });
});
