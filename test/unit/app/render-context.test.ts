import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RenderContext } from "../../../shared/app/render-context.js";
import { PATTERN_SECTION } from "../../../shared/core/haproxy-config/pattern-files.js";
import { parseRenderOptions } from "../../../shared/core/settings/options.js";
import { parseSnapshot } from "../../../shared/core/kubernetes/snapshot.js";
import { BUILTIN_TEMPLATE_DIR } from "../../../shared/adapters/templates.js";

const demo = parseSnapshot(
  readFileSync(join(import.meta.dirname, "..", "..", "..", "examples", "cluster.yaml"), "utf8"),
);

describe("--template", () => {
  const dir = mkdtempSync(join(tmpdir(), "servicelb-tpl-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("uses the user's main template and fragments beside it, built-in ones for the rest", () => {
    const main = join(dir, "haproxy.cfg.liquid");
    writeFileSync(
      main,
      readFileSync(join(BUILTIN_TEMPLATE_DIR(), "haproxy.cfg.liquid"), "utf8").replace(
        "# Rendered by servicelb.",
        "# ACME edge.",
      ),
    );
    // A fragment with a filter is not plain: liquidjs renders it per item, with the same result shape.
    writeFileSync(
      join(dir, "server.liquid"),
      "    server {{ server.name | upcase }} {{ server.address }}{% if server.disabled %} disabled{% endif %} check inter {{ server.inter }}\n",
    );
    const config = new RenderContext(parseRenderOptions({}), { template: main }).render(demo).config;
    expect(config.startsWith("# ACME edge.")).toBe(true);
    expect(config).toMatch(/^ {4}server S\d 127\.0\.0\.1:18181 check inter 2s$/m);
    expect(config).toContain("backend default_web_80 from http_defaults");
  });

  it("routes by rule lines, with no maps and no spare backends, for a main template that places http_rules", () => {
    const own = mkdtempSync(join(dir, "rules-"));
    const main = join(own, "haproxy.cfg.liquid");
    const builtin = readFileSync(join(BUILTIN_TEMPLATE_DIR(), "haproxy.cfg.liquid"), "utf8");
    writeFileSync(main, builtin.replace("{{ http_route_maps }}", "{{ http_rules }}"));
    const result = new RenderContext(parseRenderOptions({}), { template: main }).render(demo);
    expect(result.config).toContain(
      "    use_backend default_web_80 if { path -m str /web } || { path -m beg /web/ }\n",
    );
    expect(result.config).not.toContain("map_beg(");
    expect(result.config).not.toContain(PATTERN_SECTION);
    expect(result.config).not.toContain("backend spare_");
    expect(result.layout).toBeNull();
  });

  it("gives a main template that tests or filters a section the section's text", () => {
    const builtin = readFileSync(join(BUILTIN_TEMPLATE_DIR(), "haproxy.cfg.liquid"), "utf8");
    // The test older templates used, and a filter: both must see the text, not a placeholder.
    const custom = builtin
      .replace("{% if o.has_tcp_frontends %}", '{% if tcp_frontends != "" %}')
      .replace("{{ backends }}", "# {{ backends | size }} bytes of backends\n{{ backends }}");
    expect(custom).not.toBe(builtin);
    const own = mkdtempSync(join(dir, "tested-"));
    const main = join(own, "haproxy.cfg.liquid");
    writeFileSync(main, custom);
    const expected = new RenderContext(parseRenderOptions({})).render(demo).config;
    const config = new RenderContext(parseRenderOptions({}), { template: main }).render(demo).config;
    const marker = /^# (\d+) bytes of backends\n/m.exec(config);
    // The backends run up to the file section (the route maps), which follows every config.
    const end = config.indexOf(`\n${PATTERN_SECTION}\n`) + 1;
    expect(end).toBeGreaterThan(0);
    expect(Number(marker?.[1])).toBe(end - marker!.index - marker![0].length);
    expect(config.replace(marker![0], "")).toBe(expected);
  });

  it("gives captured output the section's text", () => {
    const builtin = readFileSync(join(BUILTIN_TEMPLATE_DIR(), "haproxy.cfg.liquid"), "utf8");
    const custom = builtin.replace(
      "{{ backends }}",
      '{% capture all %}{{ backends }}{% endcapture %}{% if all contains "server s1 " %}# has servers\n{% endif %}{{ all }}',
    );
    expect(custom).not.toBe(builtin);
    const own = mkdtempSync(join(dir, "captured-"));
    const main = join(own, "haproxy.cfg.liquid");
    writeFileSync(main, custom);
    const expected = new RenderContext(parseRenderOptions({})).render(demo).config;
    const config = new RenderContext(parseRenderOptions({}), { template: main }).render(demo).config;
    expect(config.replace("# has servers\n", "")).toBe(expected);
    expect(config).toContain("# has servers\n");
  });
});
