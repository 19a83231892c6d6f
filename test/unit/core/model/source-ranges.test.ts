import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseBackendSettings, SETTING_ANNOTATIONS as A } from "../../../../shared/core/model/backend-settings.js";
import { parseSource, readSourceList } from "../../../../shared/core/model/source-ranges.js";

describe("parseSource", () => {
  it.each([
    ["::ffff:127.0.0.1", "127.0.0.1"],
    ["::FFFF:10.0.0.1", "10.0.0.1"],
    ["::ffff:7f00:1", "127.0.0.1"],
    ["0:0:0:0:0:ffff:a00:1", "10.0.0.1"],
    ["::ffff:10.0.0.0/104", "10.0.0.0/8"],
    ["::ffff:0:0/96", "0.0.0.0/0"],
    ["::ffff:0:0/95", "::ffff:0:0/95"],
  ])("an IPv4-mapped address %s is the IPv4 client %s", (raw, out) => {
    expect(parseSource(raw)).toBe(out);
    expect(parseSource(out)).toBe(out);
  });

  it.each(["::10.0.0.1", "64:ff9b::10.0.0.1", "::ffff:10.0.0.1/95", "::ffff:300.0.0.1"])(
    "an IPv6 form with a dotted tail that is not a mapped IPv4 address is refused: %s",
    (raw) => expect(parseSource(raw)).toBeNull(),
  );
});

describe("readSourceList", () => {
  it("keeps the valid entries, reports the others as written, and counts what is past the cap", () => {
    expect(readSourceList("10.9.9.9/32,10.1.1.1/33, bogus ,10.9.9.9/32,,fd00::/8")).toEqual({
      entries: ["10.9.9.9/32", "fd00::/8"],
      invalid: ["10.1.1.1/33", " bogus ", ""],
      beyond: 0,
    });
    expect(readSourceList("10.0.0.1,10.0.0.2,10.0.0.3", 2)).toEqual({
      entries: ["10.0.0.1", "10.0.0.2"],
      invalid: [],
      beyond: 1,
    });
  });
});

describe("access lists fail closed", () => {
  const settings = (annotations: Record<string, string>) => parseBackendSettings(annotations, false);
  const many = (n: number) => Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`).join(",");

  it("an allow list keeps its valid entries and warns with the bad ones", () => {
    const { settings: s, warnings } = settings({ [A.allowSourceRange]: "10.9.9.9/32,10.1.1.1/33" });
    expect(s.allowSources).toEqual(["10.9.9.9/32"]);
    expect(s.denySources).toBeNull();
    expect(warnings).toEqual([
      {
        annotation: A.allowSourceRange,
        message: '"10.1.1.1/33" is not an address or CIDR: dropped, the remaining 1 apply',
      },
    ]);
  });

  it("an allow list with no valid entry allows no one", () => {
    const { settings: s, warnings } = settings({ [A.allowSourceRange]: "bogus" });
    expect(s.allowSources).toEqual([]);
    expect(warnings[0]!.message).toMatch(/no entry left, every client gets 403/);
  });

  it("an allow list over the cap keeps its first 10,000 entries", () => {
    const { settings: s, warnings } = settings({ [A.allowSourceRange]: many(10_001) });
    expect(s.allowSources).toHaveLength(10_000);
    expect(s.allowSources).not.toContain("10.39.16.0/24");
    expect(warnings[0]!.message).toBe("1 entries past the first 10000: dropped, the remaining 10000 apply");
  });

  it.each([
    ["a bad entry", "127.0.0.1,bogus", "127.0.0.1", '"bogus" is not an address or CIDR'],
    ["over the cap", many(10_002), "10.0.0.0/24", "2 entries past the first 10000"],
    ["a trailing comma", "127.0.0.1,", "127.0.0.1", '"" is not an address or CIDR'],
  ])("a deny list with %s refuses everyone, keeping its valid entries", (_, raw, kept, why) => {
    const { settings: s, warnings } = settings({ [A.denySourceRange]: raw });
    expect(s.allowSources).toEqual([]);
    expect(s.denySources).toContain(kept);
    expect(warnings).toEqual([
      {
        annotation: A.denySourceRange,
        message: `${why}: the list cannot be applied as written, so every client gets 403 (TCP: the connection is closed) until it is fixed`,
      },
    ]);
  });

  it("an IPv4-mapped deny entry denies the IPv4 client", () => {
    const { settings: s, warnings } = settings({ [A.denySourceRange]: "::ffff:127.0.0.1" });
    expect(s.denySources).toEqual(["127.0.0.1"]);
    expect(s.allowSources).toBeNull();
    expect(warnings).toEqual([]);
  });
});

/*
 * The property: whatever an allow or deny annotation holds, the clients the rendered settings
 * admit are a subset of what the list's valid entries, read as meant, admit. An entry that cannot
 * be read could have named any client, so a deny list holding one admits no one in that reading.
 * Addresses are compared as 128-bit numbers (IPv4 as its mapped IPv6 address, as HAProxy matches
 * an IPv4 client against IPv6 patterns), computed here independently of source-ranges.ts.
 */
interface Meaning {
  text: string;
  /** null: not an address or CIDR. */
  net: { addr: bigint; bits: number } | null;
}

const MAPPED = 0xffffn << 32n;
const v4 = (b: number[]) => b.reduce((n, x) => (n << 8n) | BigInt(x), 0n);

function expand6(text: string): bigint {
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const hs = head ? head.split(":") : [];
  const ts = tail ? tail.split(":") : [];
  const groups = tail === undefined ? hs : [...hs, ...Array(8 - hs.length - ts.length).fill("0"), ...ts];
  return groups.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}

/** A rendered entry as a 128-bit network. */
function netOf(entry: string): { addr: bigint; bits: number } {
  const [ip, bits] = entry.split("/");
  if (ip!.includes(":")) return { addr: expand6(ip!), bits: bits === undefined ? 128 : Number(bits) };
  return { addr: MAPPED | v4(ip!.split(".").map(Number)), bits: 96 + (bits === undefined ? 32 : Number(bits)) };
}

const inNet = (client: bigint, n: { addr: bigint; bits: number }) =>
  client >> BigInt(128 - n.bits) === n.addr >> BigInt(128 - n.bits);

const byte = fc.integer({ min: 0, max: 3 });
const entry: fc.Arbitrary<Meaning> = fc.oneof(
  fc.tuple(byte, byte, fc.option(fc.integer({ min: 28, max: 32 }))).map(([c, d, bits]) => ({
    text: `127.0.${c}.${d}${bits === null ? "" : `/${bits}`}`,
    net: { addr: MAPPED | v4([127, 0, c, d]), bits: 96 + (bits ?? 32) },
  })),
  fc.tuple(byte, byte).map(([c, d]) => ({
    text: `::ffff:127.0.${c}.${d}`,
    net: { addr: MAPPED | v4([127, 0, c, d]), bits: 128 },
  })),
  fc.tuple(byte, fc.option(fc.integer({ min: 124, max: 128 }))).map(([d, bits]) => ({
    text: `fd00::${d}${bits === null ? "" : `/${bits}`}`,
    net: { addr: (0xfd00n << 112n) | BigInt(d), bits: bits ?? 128 },
  })),
  fc
    .constantFrom("bogus", "127.0.0.1/33", "", "::127.0.0.1", "0127.0.0.1", "127.0.0.1/032", "fd00::/129")
    .map((text) => ({ text, net: null })),
);
const client = fc.oneof(
  fc.tuple(byte, byte).map(([c, d]) => MAPPED | v4([127, 0, c, d])),
  byte.map((d) => (0xfd00n << 112n) | BigInt(d)),
);

describe("property: a list never admits a client its valid reading excludes", () => {
  it("for any allow and deny annotation", () => {
    fc.assert(
      fc.property(
        fc.option(fc.array(entry, { minLength: 1, maxLength: 6 })),
        fc.option(fc.array(entry, { minLength: 1, maxLength: 6 })),
        fc.array(client, { minLength: 1, maxLength: 8 }),
        (allow, deny, clients) => {
          const annotations: Record<string, string> = {};
          if (allow) annotations[A.allowSourceRange] = allow.map((e) => e.text).join(",");
          if (deny) annotations[A.denySourceRange] = deny.map((e) => e.text).join(",");
          const { settings: s } = parseBackendSettings(annotations, false);
          const matches = (list: readonly string[], c: bigint) => list.some((e) => inNet(c, netOf(e)));
          for (const c of clients) {
            const admitted =
              (s.allowSources === null || matches(s.allowSources, c)) &&
              !(s.denySources !== null && matches(s.denySources, c));
            const meant =
              (!allow || allow.some((e) => e.net !== null && inNet(c, e.net))) &&
              (!deny || deny.every((e) => e.net !== null && !inNet(c, e.net)));
            if (admitted && !meant) return false;
          }
          return true;
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
