import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseRenderOptions, type RenderOptionsInput } from "../../../../shared/core/settings/options.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { parseSnapshot } from "../../../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";

/**
 * Golden configs for representative clusters, reviewed by eye when they change:
 * UPDATE_GOLDEN=1 npx vitest run test/unit/core/render/render.golden.test.ts rewrites them.
 */
const dir = join(import.meta.dirname, "..", "..", "..", "golden");
const cases: Array<[string, string, RenderOptionsInput]> = [
  ["demo", join(import.meta.dirname, "..", "..", "..", "..", "examples", "cluster.yaml"), {}],
  ["mixed", join(dir, "mixed.yaml"), { tcpServices: "mysql:3306", sslCert: "/etc/haproxy/certs/lb.pem" }],
  [
    "mixed-forward",
    join(dir, "mixed.yaml"),
    { forwardServices: true, syslog: true, statsUser: "admin", defaultReturnCode: 503, balanceAlgorithm: "leastconn" },
  ],
  [
    "settings",
    join(dir, "settings.yaml"),
    {
      tcpServices: "mysql:3306",
      sslCert: "/etc/haproxy/certs/lb.pem",
      timeoutServer: "30s",
      timeoutClient: "1m",
      timeoutConnect: "3s",
      timeoutTunnel: "30m",
      timeoutQueue: "10s",
      acceptProxy: "10.0.0.0/8, fd00::/8",
    },
  ],
];
const renderer = new Renderer(loadTemplates());

describe("golden configs", () => {
  it.each(cases)("%s", (name, snapshotFile, options) => {
    const result = renderSnapshot(
      parseSnapshot(readFileSync(snapshotFile, "utf8")),
      parseRenderOptions(options),
      renderer,
    );
    const text = `${result.config}# warnings:\n${result.warnings.map((w) => `#   ${JSON.stringify(w)}\n`).join("")}# skipped:\n${result.skipped.map((s) => `#   ${JSON.stringify(s)}\n`).join("")}`;
    const file = join(dir, `${name}.cfg`);
    if (process.env.UPDATE_GOLDEN) writeFileSync(file, text);
    expect(existsSync(file), `${file} is missing: run with UPDATE_GOLDEN=1 and review it`).toBe(true);
    expect(text).toBe(readFileSync(file, "utf8"));
  });
});
