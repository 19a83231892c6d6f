import { describe, expect, it } from "vitest";
import { haproxyQuote } from "../../../../shared/core/render/haproxy-quote.js";

describe("haproxyQuote", () => {
  it("leaves plain printable ASCII as it is", () => {
    expect(haproxyQuote("No service matches <this> request.")).toBe('"No service matches <this> request."');
  });

  it("escapes what HAProxy would expand, end or interpret inside quotes", () => {
    expect(haproxyQuote("a \"b\" \\ ${HOME} #c 'd'")).toBe('"a \\"b\\" \\\\ \\${HOME} \\#c \\\'d\\\'"');
    expect(haproxyQuote("line1\nline2\r\tend")).toBe('"line1\\nline2\\r\\tend"');
  });

  it("writes every other byte as \\xNN of its UTF-8 encoding", () => {
    expect(haproxyQuote("é\u0000")).toBe('"\\xc3\\xa9\\x00"');
  });

  it("never lets a newline or an unescaped quote through, whatever the text", () => {
    for (const text of ["\n    server x 1.2.3.4:80", '"; http-request deny', "\u2028\u2029"]) {
      const q = haproxyQuote(text);
      expect(q).not.toMatch(/[\n\r]/);
      expect(q.slice(1, -1)).not.toMatch(/(^|[^\\])"/);
    }
  });
});
