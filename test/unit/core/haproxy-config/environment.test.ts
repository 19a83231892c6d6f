import { describe, expect, it } from "vitest";
import { expandWord, nodeWord, unsetNodeVariables } from "../../../../shared/core/haproxy-config/environment.js";

describe("nodeWord", () => {
  it("quotes a value that names a variable, so that HAProxy expands it, and leaves any other as it is", () => {
    expect(nodeWord("${SERVICELB_NODE_ADDRESS}")).toBe('"${SERVICELB_NODE_ADDRESS}"');
    expect(nodeWord("${SERVICELB_CONFIG_DIR}/admin.sock")).toBe('"${SERVICELB_CONFIG_DIR}/admin.sock"');
    for (const plain of ["*", "127.0.0.1", "[::1]", "/var/run/haproxy/admin.sock", "$HOME"])
      expect(nodeWord(plain)).toBe(plain);
  });
});

describe("expandWord", () => {
  const env = { A: "127.0.0.2", DIR: "/data/n2", EMPTY: "" };

  it("expands variables inside double quotes only, as HAProxy does", () => {
    expect(expandWord('"${A}":80', env)).toBe("127.0.0.2:80");
    expect(expandWord('"$DIR/admin.sock"', env)).toBe("/data/n2/admin.sock");
    expect(expandWord("${A}:80", env)).toBe("${A}:80");
    expect(expandWord("'${A}'", env)).toBe("${A}");
    expect(expandWord('"\\${A}"', env)).toBe("${A}");
    expect(expandWord("/plain/path", env)).toBe("/plain/path");
  });

  it("makes an unset variable empty, or its default; a default does not replace an empty one", () => {
    expect(expandWord('"${UNSET}":80', env)).toBe(":80");
    expect(expandWord('"${UNSET-127.0.0.1}":80', env)).toBe("127.0.0.1:80");
    expect(expandWord('"${EMPTY-127.0.0.1}":80', env)).toBe(":80");
    expect(expandWord('"a$"', env)).toBe("a$");
  });
});

describe("unsetNodeVariables", () => {
  it("names each SERVICELB_ variable the config takes that the environment leaves unset or empty, once", () => {
    const text =
      'global\n    stats socket "${SERVICELB_CONFIG_DIR}/admin.sock"\nfrontend f\n    bind "${SERVICELB_NODE_ADDRESS}":80\n    bind "${SERVICELB_NODE_ADDRESS}":81\n    bind "${OTHER}":82\n';
    expect(unsetNodeVariables(text, { SERVICELB_CONFIG_DIR: "/d" })).toEqual(["SERVICELB_NODE_ADDRESS"]);
    expect(unsetNodeVariables(text, { SERVICELB_CONFIG_DIR: "", SERVICELB_NODE_ADDRESS: "127.0.0.2" })).toEqual([
      "SERVICELB_CONFIG_DIR",
    ]);
    expect(unsetNodeVariables(text, { SERVICELB_CONFIG_DIR: "/d", SERVICELB_NODE_ADDRESS: "127.0.0.2" })).toEqual([]);
  });
});
