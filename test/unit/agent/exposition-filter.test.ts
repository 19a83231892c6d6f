import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FamilyFilter, familyFilterStream } from "../../../shared/agent/exposition-filter.js";

const PAGE = [
  "# HELP haproxy_backend_status Current status of the service.",
  "# TYPE haproxy_backend_status gauge",
  'haproxy_backend_status{proxy="web",state="UP"} 1',
  'haproxy_backend_status{proxy="web",state="DOWN"} 0',
  "# HELP haproxy_backend_http_requests_total Total number of HTTP requests processed by this object.",
  "# TYPE haproxy_backend_http_requests_total counter",
  'haproxy_backend_http_requests_total{proxy="web"} 12',
  'haproxy_backend_http_requests_total{proxy="spare_1"} 0',
  "# HELP haproxy_backend_agg_check_status Backend's aggregated gauge of servers' status",
  "# TYPE haproxy_backend_agg_check_status gauge",
  'haproxy_backend_agg_check_status{proxy="web",state="HANA"} 0',
  "",
].join("\n");

/** The whole page through the filter, cut into chunks at these offsets. */
function run(page: string | Buffer, families: string[], cuts: number[] = [], maxLine?: number) {
  const filter = new FamilyFilter(new Set(families), maxLine);
  const bytes = Buffer.from(page);
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b), bytes.length]) {
    out.push(...filter.write(bytes.subarray(from, cut)));
    from = cut;
  }
  filter.end();
  return { text: Buffer.concat(out).toString(), counts: filter.counts };
}

describe("FamilyFilter", () => {
  it("keeps the families named with their HELP and TYPE lines, and drops every other", () => {
    const { text, counts } = run(PAGE, ["haproxy_backend_http_requests_total"]);
    expect(text).toBe(
      [
        "# HELP haproxy_backend_http_requests_total Total number of HTTP requests processed by this object.",
        "# TYPE haproxy_backend_http_requests_total counter",
        'haproxy_backend_http_requests_total{proxy="web"} 12',
        'haproxy_backend_http_requests_total{proxy="spare_1"} 0',
        "",
      ].join("\n"),
    );
    expect(counts).toEqual({ malformed: 0, tooLong: 0 });
  });

  it("keeps several families in the page's order; none named that the page has: nothing", () => {
    const both = run(PAGE, ["haproxy_backend_agg_check_status", "haproxy_backend_status"]).text;
    expect(both.split("\n").filter((l) => !l.startsWith("#") && l !== "")).toEqual([
      'haproxy_backend_status{proxy="web",state="UP"} 1',
      'haproxy_backend_status{proxy="web",state="DOWN"} 0',
      'haproxy_backend_agg_check_status{proxy="web",state="HANA"} 0',
    ]);
    expect(run(PAGE, ["haproxy_server_status"]).text).toBe("");
  });

  it("gives the same output however the page is cut into chunks", () => {
    const families = ["haproxy_backend_status", "haproxy_backend_agg_check_status"];
    const whole = run(PAGE, families).text;
    fc.assert(
      fc.property(fc.array(fc.nat(PAGE.length), { maxLength: 30 }), (cuts) => {
        expect(run(PAGE, families, cuts).text).toBe(whole);
      }),
    );
  });

  it("keeps a histogram's _bucket, _sum and _count samples with their family", () => {
    const page = [
      "# TYPE h histogram",
      'h_bucket{le="1"} 1',
      'h_bucket{le="+Inf"} 2',
      "h_sum 3",
      "h_count 2",
      "# TYPE other gauge",
      "other 1",
      "",
    ].join("\n");
    expect(run(page, ["h"]).text).toBe(page.slice(0, page.indexOf("# TYPE other")));
  });

  it("takes a sample without HELP or TYPE lines by its own name", () => {
    expect(run("a 1\nb 2\n", ["b"]).text).toBe("b 2\n");
  });

  it("drops other comments and empty lines, and keeps label values byte for byte", () => {
    const page = '# a note\n\nx{proxy="caf\u00e9 \\"q\\""} 1\n';
    expect(run(page, ["x"]).text).toBe('x{proxy="caf\u00e9 \\"q\\""} 1\n');
  });

  it("drops and counts lines that are not samples; the next lines still pass", () => {
    const page = [
      '{proxy="web"} 1', // no name
      "!!! 1",
      "# HELP",
      "# TYPE 9bad gauge",
      "9bad 1",
      "justaname",
      "# TYPE x gauge",
      "x 1",
      "",
    ].join("\n");
    const { text, counts } = run(page, ["x", "9bad", "justaname"]);
    expect(text).toBe("# TYPE x gauge\nx 1\n");
    expect(counts).toEqual({ malformed: 6, tooLong: 0 });
  });

  it("never keeps an unterminated last line: a page cut short must not give a cut value", () => {
    const { text, counts } = run("x 1\nx 12", ["x"]);
    expect(text).toBe("x 1\n");
    expect(counts.malformed).toBe(1);
  });

  it("drops a line over the limit, holding no more than the limit, and goes on after it", () => {
    const huge = `x{proxy="${"a".repeat(10_000)}"} 1`;
    const page = `x 1\n${huge}\nx 2\n`;
    for (const cuts of [[], [5, 100, 5000, 9000], Array.from({ length: 200 }, (_, i) => i * 50)]) {
      const { text, counts } = run(page, ["x"], cuts, 1024);
      expect(text).toBe("x 1\nx 2\n");
      expect(counts).toEqual({ malformed: 0, tooLong: 1 });
    }
    // A line of exactly the limit (its newline aside) passes.
    const fits = `x ${"1".repeat(1022)}`;
    expect(run(`${fits}\n`, ["x"], [], 1024).text).toBe(`${fits}\n`);
  });

  it("drops an endless line and resumes after its newline", () => {
    const filter = new FamilyFilter(new Set(["x"]), 1024);
    for (let i = 0; i < 2000; i++) expect(filter.write(Buffer.alloc(4096, 0x61))).toEqual([]);
    expect(filter.write(Buffer.from("\nx 1\n")).map(String)).toEqual(["x 1\n"]);
    expect(filter.counts.tooLong).toBe(1);
  });
});

describe("familyFilterStream", () => {
  it("streams the kept lines and counts what it dropped once ended", async () => {
    const stream = familyFilterStream(new Set(["haproxy_backend_status"]));
    const out = await text(
      Readable.from([Buffer.from(PAGE.slice(0, 70)), Buffer.from(`${PAGE.slice(70)}junk`)]).pipe(stream),
    );
    expect(out.split("\n")).toHaveLength(5);
    expect(out).toContain('haproxy_backend_status{proxy="web",state="DOWN"} 0\n');
    expect(stream.counts).toEqual({ malformed: 1, tooLong: 0 });
  });
});
