import { rollingUpdate } from "../../../support/rollout.js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RenderContext } from "../../../../shared/app/render-context.js";
import { backendLayoutSchema, layoutDigest } from "../../../../shared/core/model/layout-record.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { list, service, slice, wideService } from "../../../support/fixtures.js";
import { decideTexts as decideApply } from "../../../support/haproxy-config.js";

const OPTIONS = { statsSocket: "/tmp/servicelb-test.sock", spareBackends: 3 };

/** Service `name` in `namespace` on port 80 with one endpoint per address. */
function svc(
  name: string,
  addresses: string[],
  opts: { namespace?: string; annotations?: Record<string, string> } = {},
) {
  const { namespace = "default", annotations } = opts;
  return [
    service(name, [{ port: 80, targetPort: 8080 }], { namespace, annotations }),
    slice(name, [{ port: 8080 }], addresses, { namespace }),
  ];
}

function renderer(extra: Record<string, unknown> = {}) {
  const ctx = new RenderContext(parseRenderOptions({ ...OPTIONS, ...extra }));
  let revision = 100;
  return (items: unknown[]) => ctx.render(snapshotFromDocuments([list(items, String(++revision))]));
}

const backendsOf = (config: string) => [...config.matchAll(/^backend (\S+)/gm)].map((m) => m[1]);
const serviceMap = (config: string) =>
  (/^#> maps\/backends\.map\n((?:#\| .*\n)*)/m.exec(config)?.[1] ?? "")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.slice(3));
const paths = (config: string) => [...config.matchAll(/^#\| (\/\S* \S+)$/gm)].map((m) => m[1]);

describe("placeBackends", () => {
  it("a fresh layout gives every Service its own backend and provisions the spares", () => {
    const r = renderer()([...svc("web", ["10.0.0.1"]), ...svc("api", ["10.0.0.2"], { namespace: "shop" })]);
    expect(r.layoutFresh).toBe("no previous layout");
    expect(r.layout).toEqual({
      version: 1,
      spareSlots: 4,
      named: ["default_web_80", "shop_api_80"],
      slots: [4, 4],
      spares: [
        { name: "spare_1", holds: null },
        { name: "spare_2", holds: null },
        { name: "spare_3", holds: null },
      ],
      vacated: [],
    });
    expect(backendsOf(r.config)).toEqual([
      "default_page",
      "default_web_80",
      "shop_api_80",
      "spare_1",
      "spare_2",
      "spare_3",
    ]);
  });

  it("puts a new Service into the lowest free spare and routes its own path there with the segments to strip", () => {
    const render = renderer();
    const web = svc("web", ["10.0.0.1"]);
    render(web);
    const r = render([...web, ...svc("cart", ["10.0.0.3"], { namespace: "shop" }), ...svc("api", ["10.0.0.2"])]);
    expect(r.layoutFresh).toBeNull();
    expect(r.layout!.spares).toEqual([
      { name: "spare_1", holds: "default_api_80" },
      { name: "spare_2", holds: "shop_cart_80" },
      { name: "spare_3", holds: null },
    ]);
    expect(paths(r.config)).toEqual(["/api/ spare_1|1", "/shop/cart/ spare_2|2", "/web/ default_web_80"]);
    expect(r.config).toMatch(/^backend spare_1 from http_defaults\n(.*\n)*? {4}server s\d 10\.0\.0\.2:8080\n/m);
    expect(r.config).not.toContain("backend default_api_80");
  });

  it("sizes the spares like the largest backend, so a new Service of that size fits one", () => {
    const render = renderer();
    const ten = (prefix: string) => Array.from({ length: 10 }, (_, i) => `${prefix}.${i + 1}`);
    const web = svc("web", ten("10.0.0"));
    // Ten endpoints take 11 slots: one free, more added at runtime when needed (slots.ts).
    expect(render(web).layout!.spareSlots).toBe(11);
    const r = render([...web, ...svc("api", ten("10.0.1"))]);
    expect(r.layoutFresh).toBeNull();
    expect(r.layout!.spares[0]).toEqual({ name: "spare_1", holds: "default_api_80" });
    const spare = /^backend spare_1 [^\n]*\n((?: {4}[^\n]*\n)*)/m.exec(r.config)![1]!;
    expect(spare.match(/^ {4}server s\d+ /gm)).toHaveLength(11);
    expect(spare.match(/^ {4}server s\d+ 10\.0\.1\.\d+:8080$/gm)).toHaveLength(10);
  });

  it("frees a spare when its Service goes, and keeps a removed Service's own backend empty", () => {
    const render = renderer();
    const web = svc("web", ["10.0.0.1"]);
    const api = svc("api", ["10.0.0.2"]);
    render(web);
    render([...web, ...api]);
    const r = render([]);
    expect(r.layoutFresh).toBeNull();
    expect(r.layout!.spares[0]).toEqual({ name: "spare_1", holds: null });
    expect(r.layout!.vacated).toEqual([
      {
        name: "default_web_80",
        namespace: "default",
        service: "web",
        servicePort: 80,
        slots: 4,
        strip: { prefix: "/web", unlessHost: null },
      },
    ]);
    expect(r.config).toContain("backend default_web_80 ");
    expect(paths(r.config)).toEqual([]);
    // Back again as it was: its own backend once more.
    const again = render(web);
    expect(again.layoutFresh).toBeNull();
    expect(again.layout!.named).toEqual(["default_web_80"]);
    expect(again.layout!.vacated).toEqual([]);
  });

  it("the Service map names the Service port a spare holds, and none for a free spare or a vacated backend", () => {
    const render = renderer();
    const web = svc("web", ["10.0.0.1"]);
    const first = render(web);
    const held = render([...web, ...svc("api", ["10.0.0.2"], { namespace: "shop" })]);
    expect(serviceMap(held.config)).toEqual(["default_web_80 default/web/80", "spare_1 shop/api/80"]);
    const gone = render(svc("api", ["10.0.0.2"], { namespace: "shop" }));
    expect(serviceMap(gone.config)).toEqual(["spare_1 shop/api/80"]);
    // Slots and map lines only: the agent takes both without a reload.
    expect(decideApply({ text: first.config, known: true }, held.config).kind).toBe("runtime");
    expect(decideApply({ text: held.config, known: true }, gone.config).kind).toBe("runtime");
  });

  it("starts afresh, saying why, when a spare cannot take the change", () => {
    const render = renderer({ spareBackends: 1 });
    const web = svc("web", ["10.0.0.1"]);
    render(web);
    expect(render([...web, ...svc("a", ["10.0.0.2"])]).layoutFresh).toBeNull();
    expect(render([...web, ...svc("a", ["10.0.0.2"]), ...svc("b", ["10.0.0.3"])]).layoutFresh).toBe(
      "no spare backend left for default_b_80",
    );
    const custom = svc("c", ["10.0.0.4"], { annotations: { "serviceloadbalancer/lb.algorithm": "leastconn" } });
    expect(render([...web, ...custom]).layoutFresh).toBe("default_c_80 needs a backend of its own");
    const many = svc("d", ["10.0.0.5"]);
    render([...web, ...custom, ...many]);
    const grown = svc("d", ["10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8", "10.0.0.9"]);
    expect(render([...web, ...custom, ...grown]).layoutFresh).toBe("default_d_80 outgrew spare_1");
  });

  it("starts afresh when a removed Service would leave behind more slots than the spares have", () => {
    const render = renderer();
    const web = svc("web", ["10.0.0.1"]);
    render(web);
    // 64 ports of their own: more than the spares take, a fresh layout.
    const wide = wideService(
      "wide",
      Array.from({ length: 64 }, (_, i) => 1000 + i),
      ["10.0.0.9"],
    );
    expect(render([...web, ...wide]).layout!.named).toHaveLength(65);
    const r = render(web);
    expect(r.layoutFresh).toBe(
      "backends left behind by removed Services would hold 256 server slots, more than the 12 of the spares",
    );
    expect(r.layout!.vacated).toEqual([]);
    expect(backendsOf(r.config)).toEqual(["default_page", "default_web_80", "spare_1", "spare_2", "spare_3"]);
  });

  it("starts afresh when the absorbed config would need more descriptors than the smallest node has", () => {
    // Servers cost descriptors when they are health-checked.
    const ctx = new RenderContext(parseRenderOptions({ ...OPTIONS, activeChecks: "true" }));
    let revision = 100;
    const render = (items: unknown[]) => ctx.render(snapshotFromDocuments([list(items, String(++revision))]));
    const web = svc("web", ["10.0.0.1"]);
    const before = render(web).stats.descriptors;
    // A Service too large for a spare gets a backend of its own (and spares its size); gone again,
    // it leaves its backend behind, which the spares' slots allow...
    const own = svc("own", ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]);
    const grown = render([...web, ...own]).stats.descriptors;
    expect(grown).toBeGreaterThan(before);
    const kept = render(web);
    expect(kept.layoutFresh).toBeNull();
    expect(kept.stats.descriptors).toBe(grown);
    // ...unless the nodes cannot open that many: they refused the config with it, and would refuse this too.
    render([...web, ...own]);
    ctx.useRoom(grown - 1);
    const r = render(web);
    expect(r.layoutFresh).toBe(
      `the config would need ${grown} descriptors for its listeners and server slots, the smallest node has room for ${grown - 1}`,
    );
    expect(r.stats.descriptors).toBe(before);
    expect(r.layout!.vacated).toEqual([]);
  });

  it("has no spares when a global source list gives every backend its own pattern file", () => {
    const r = renderer({ allowSourceRange: "10.0.0.0/8" })(svc("web", ["10.0.0.1"]));
    expect(r.layout!.spares).toEqual([]);
  });

  it("the record survives its schema and digest unchanged (what a cold instance reads back)", () => {
    const render = renderer();
    const web = svc("web", ["10.0.0.1"], { annotations: { "serviceloadbalancer/lb.host": "web.example.com" } });
    render(web);
    const r = render(svc("api", ["10.0.0.2"]));
    const parsed = backendLayoutSchema.parse(JSON.parse(JSON.stringify(r.layout)));
    expect(layoutDigest(parsed)).toBe(layoutDigest(r.layout!));
    expect(parsed.vacated[0]!.strip).toEqual({
      prefix: "/web",
      unlessHost: { name: "web.example.com", wildcard: false },
    });
  });

  it("whenever the layout absorbs Services added and removed, the agent applies it without a reload (property)", () => {
    const names = ["a", "b", "c", "d", "e", "f"];
    // Each Service keeps its definition (a and d claim a host, d lives in another namespace);
    // what changes is which Services exist and their endpoints, within the slots they have.
    const define = (name: string, endpoints: number) =>
      svc(
        name,
        Array.from({ length: endpoints }, (_, k) => `10.1.${name.charCodeAt(0)}.${k + 1}`),
        {
          ...(name === "d" ? { namespace: "shop" } : {}),
          ...(name === "a" || name === "d"
            ? { annotations: { "serviceloadbalancer/lb.host": `${name}.example.com` } }
            : {}),
        },
      );
    const state = fc.record({ present: fc.subarray(names), endpoints: fc.integer({ min: 0, max: 4 }) });
    let absorbed = 0;
    fc.assert(
      fc.property(fc.array(state, { minLength: 2, maxLength: 8 }), (states) => {
        // Backends left behind may hold as many slots as the spares: three Services' worth.
        const render = renderer({ spareBackends: 3 });
        let before: string | null = null;
        for (const s of states) {
          const r = render(s.present.flatMap((name, i) => define(name, (s.endpoints + i) % 5)));
          if (before !== null && r.layoutFresh === null) {
            absorbed++;
            expect(decideApply({ text: before, known: true }, r.config).kind).not.toBe("reload");
          }
          before = r.config;
        }
      }),
      { numRuns: 60 },
    );
    // The property says something only if most changes were absorbed rather than started afresh.
    expect(absorbed).toBeGreaterThan(100);
  });

  describe("slot counts that hold through rollouts and autoscaling", () => {
    const pods = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}.${i + 1}`);
    /** Renders each set of endpoints in turn; the changes after the first that would reload. */
    const reloadsOver = (sets: string[][]): string[] => {
      const render = renderer();
      let before = render(svc("web", sets[0]!)).config;
      const reloads: string[] = [];
      for (const [i, set] of sets.slice(1).entries()) {
        const r = render(svc("web", set));
        const d = decideApply({ text: before, known: true }, r.config);
        if (d.kind === "reload" || r.layoutFresh !== null)
          reloads.push(`step ${i + 1} (${set.length} pods): ${d.kind === "reload" ? d.reason : r.layoutFresh}`);
        before = r.config;
      }
      return reloads;
    };

    const replicas = Array.from({ length: 20 }, (_, i) => i + 1);
    it.each(replicas)("a rolling update of %i replicas, maxSurge 1 and 25 %, there and back: no reload", (r) => {
      for (const surge of [1, Math.ceil(r / 4)]) {
        const old = pods("10.1.0", r);
        const next = pods("10.2.0", r);
        const sets = [old, ...rollingUpdate(old, next, surge), ...rollingUpdate(next, old, surge)];
        expect(reloadsOver(sets), `maxSurge ${surge}`).toEqual([]);
      }
    });

    it.each(replicas)("the autoscaler stepping %i replicas by one, up and down and back: no reload", (r) => {
      const at = (n: number) => pods("10.1.0", n);
      expect(reloadsOver([at(r), at(r + 1), at(r), ...(r > 1 ? [at(r - 1), at(r)] : [])])).toEqual([]);
    });

    const slotsOf = (config: string, backend: string) =>
      new RegExp(`^backend ${backend} [^\\n]*\\n((?: {4}[^\\n]*\\n)*)`, "m").exec(config)![1]!.match(/^ {4}server /gm)!
        .length;
    const addressesOf = (config: string, backend: string) =>
      new RegExp(`^backend ${backend} [^\\n]*\\n((?: {4}[^\\n]*\\n)*)`, "m")
        .exec(config)![1]!
        .split("\n")
        .filter((l) => l.startsWith("    server "));

    it("a backend that outgrows its slots grows in place: no fresh layout, its endpoints stay in their slots", () => {
      const render = renderer();
      // 10 pods take 11 slots; scaled down to 2, the backend keeps them.
      render([...svc("web", pods("10.1.0", 10)), ...svc("api", pods("10.2.0", 2))]);
      const down = render([...svc("web", pods("10.1.0", 2)), ...svc("api", pods("10.2.0", 2))]);
      expect(down.layoutFresh).toBeNull();
      expect(slotsOf(down.config, "default_web_80")).toBe(11);
      // api outgrows its 4 slots: it gets the 5 its 4 pods give, the first 4 hashed as before.
      const grown = render([...svc("web", pods("10.1.0", 2)), ...svc("api", pods("10.2.0", 4))]);
      expect(grown.layoutFresh).toBeNull();
      expect(grown.layout!.hashSlots).toEqual({ default_api_80: 4 });
      expect(slotsOf(grown.config, "default_web_80")).toBe(11);
      expect(slotsOf(grown.config, "default_api_80")).toBe(5);
      const before = addressesOf(down.config, "default_api_80");
      const after = addressesOf(grown.config, "default_api_80");
      for (const line of before.filter((l) => !l.endsWith(" disabled"))) expect(after).toContain(line);
      const d = decideApply({ text: down.config, known: true }, grown.config);
      expect(d.kind === "runtime" && d.commands.filter((c) => c.op === "add").map((c) => c.server)).toEqual(["s5"]);
      // Back to 2 pods and up to 4 again: the 5 slots hold, hashed as they were.
      const again = render([...svc("web", pods("10.1.0", 2)), ...svc("api", pods("10.2.0", 2))]);
      expect(again.layoutFresh).toBeNull();
      expect(slotsOf(again.config, "default_api_80")).toBe(5);
      expect(render([...svc("web", pods("10.1.0", 2)), ...svc("api", pods("10.2.0", 4))]).config).toBe(grown.config);
    });

    it("a backend that cannot grow at runtime (cookies) starts a fresh layout, which shrinks the others", () => {
      const render = renderer();
      const sticky = { annotations: { "serviceloadbalancer/lb.cookie-sticky-session": "true" } };
      // 10 pods take 11 slots; a sticky api's 2 pods take 4, room for a surge: 2 + 1 + 1.
      render([...svc("web", pods("10.1.0", 10)), ...svc("api", pods("10.2.0", 2), sticky)]);
      render([...svc("web", pods("10.1.0", 2)), ...svc("api", pods("10.2.0", 2), sticky)]);
      const grown = render([...svc("web", pods("10.1.0", 2)), ...svc("api", pods("10.2.0", 4), sticky)]);
      expect(grown.layoutFresh).toBe("default_api_80 outgrew its 4 server slots");
      expect(slotsOf(grown.config, "default_web_80")).toBe(4);
      expect(slotsOf(grown.config, "default_api_80")).toBe(6);
    });
  });
});
