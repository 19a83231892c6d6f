import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseRenderOptions, type RenderOptionsInput } from "../../../../shared/core/settings/options.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { parseSnapshot } from "../../../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { expandWord } from "../../../../shared/core/haproxy-config/environment.js";

/*
 * Settings that name a variable of HAProxy's environment: one config for every node, each node's
 * HAProxy reading its own address and paths (core/haproxy-config/environment.ts).
 */
const snapshot = parseSnapshot(
  readFileSync(join(import.meta.dirname, "..", "..", "..", "golden", "mixed.yaml"), "utf8"),
);
const renderer = new Renderer(loadTemplates());
const render = (o: RenderOptionsInput) =>
  renderSnapshot(snapshot, parseRenderOptions({ tcpServices: "mysql:3306", sslCert: "/etc/lb.pem", ...o }), renderer)
    .config;

const variables = {
  bindAddress: "${SERVICELB_NODE_ADDRESS}",
  statsBind: "${SERVICELB_NODE_ADDRESS}",
  statsSocket: "${SERVICELB_CONFIG_DIR}/admin.sock",
  serverStateFile: "${SERVICELB_CONFIG_DIR}/server-state",
};
const env = { SERVICELB_NODE_ADDRESS: "127.0.0.2", SERVICELB_CONFIG_DIR: "/data/node-2/haproxy" };

describe("settings that name a variable of HAProxy's environment", () => {
  it("are quoted where the config says them, and read as HAProxy reads them give the config of the node's own values", () => {
    const text = render(variables);
    for (const line of [
      '    stats socket "${SERVICELB_CONFIG_DIR}/admin.sock" mode 600',
      '    server-state-file "${SERVICELB_CONFIG_DIR}/server-state"',
      '    bind "${SERVICELB_NODE_ADDRESS}":1936',
      '    bind "${SERVICELB_NODE_ADDRESS}":80',
      '    bind "${SERVICELB_NODE_ADDRESS}":443 ssl',
      '    bind "${SERVICELB_NODE_ADDRESS}":3306',
    ])
      expect(text).toContain(line);
    const expanded = text.replace(/"\$\{[A-Z_]+\}[^"\s]*"/g, (word) => expandWord(word, env));
    expect(expanded).toBe(
      render({
        bindAddress: "127.0.0.2",
        statsBind: "127.0.0.2",
        statsSocket: "/data/node-2/haproxy/admin.sock",
        serverStateFile: "/data/node-2/haproxy/server-state",
      }),
    );
  });

  it("are refused when they are more than a variable's name where an address goes", () => {
    expect(() => parseRenderOptions({ bindAddress: "${A}x" })).toThrow(/\$\{NAME\}/);
    expect(() => parseRenderOptions({ statsSocket: "${A B}/s" })).toThrow(/\$\{NAME\}/);
    expect(() => parseRenderOptions({ statsSocket: '"${A}"/s' })).toThrow(/\$\{NAME\}/);
  });
});
