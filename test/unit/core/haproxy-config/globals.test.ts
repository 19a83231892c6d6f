import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { serverStateFileOf, statsSocketOf } from "../../../../shared/core/haproxy-config/globals.js";

/** The walk over every line these facts were read with before: the oracle of the property below. */
function everyLine(text: string, keyword: string): string | undefined {
  let inGlobal = false;
  for (const line of text.split("\n")) {
    if (/^\S/.test(line) && !line.startsWith("#")) inGlobal = line.trim() === "global";
    else if (inGlobal) {
      const m = new RegExp(`^\\s+${keyword}\\s+(\\S+)`).exec(line);
      if (m) return m[1]!;
    }
  }
  return undefined;
}

const config = `global
    master-worker
    stats socket /run/haproxy/admin.sock mode 600 level admin
    server-state-file /var/lib/haproxy/server-state

defaults http_defaults
    mode http

backend default_web_80 from http_defaults
    server s1 10.0.0.1:8080
`;

describe("facts of a config's global section", () => {
  it("reads the stats socket and the server-state file", () => {
    expect(statsSocketOf(config, {})).toBe("/run/haproxy/admin.sock");
    expect(serverStateFileOf(config, {})).toBe("/var/lib/haproxy/server-state");
  });

  it("reads a path as HAProxy does, with the environment it runs with", () => {
    const text = `global\n    stats socket "\${SERVICELB_CONFIG_DIR}/admin.sock" mode 600\n    server-state-file "\${SERVICELB_CONFIG_DIR}"/state\n`;
    const env = { SERVICELB_CONFIG_DIR: "/data/node-2/haproxy" };
    expect(statsSocketOf(text, env)).toBe("/data/node-2/haproxy/admin.sock");
    expect(serverStateFileOf(text, env)).toBe("/data/node-2/haproxy/state");
  });

  it("reads global sections only, every one of them, in order; a comment at column 0 does not end one", () => {
    const text = `defaults d\n    stats socket /not/global.sock\nglobal \n# about the socket\n    nbthread 2\n\nbackend b\n    stats socket /in/backend.sock\nglobal\n    stats socket /second/global.sock\nglobal\n    stats socket /third.sock\n`;
    expect(statsSocketOf(text, {})).toBe("/second/global.sock");
    expect(serverStateFileOf(text, {})).toBeUndefined();
    expect(statsSocketOf("global\n    stats socket /at/the/end.sock", {})).toBe("/at/the/end.sock");
    expect(statsSocketOf("backend b\n    server s1 10.0.0.1:80\n", {})).toBeUndefined();
  });

  it("finds what a walk over every line finds (property)", () => {
    const line = fc.constantFrom(
      "global",
      "global  ",
      "globals",
      " global",
      "# global",
      "backend b",
      "defaults d",
      "",
      "    stats socket /a.sock",
      "\tstats socket /b.sock level admin",
      "    server-state-file /state",
      "    server s1 10.0.0.1:80",
      "#    stats socket /commented.sock",
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), (lines) => {
        const text = lines.join("\n");
        expect(statsSocketOf(text, {})).toBe(everyLine(text, "stats socket"));
        expect(serverStateFileOf(text, {})).toBe(everyLine(text, "server-state-file"));
      }),
      { numRuns: 2000 },
    );
  });
});
