import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import { ModelCache } from "../../../../shared/core/model/model-cache.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { renderSnapshot } from "../../../../shared/core/render/pipeline.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { configDigest, configHasher, DIGEST_KINDS } from "../../../../shared/core/publish/config-digest.js";
import { ParsedItems, snapshotFromDocuments, type Snapshot } from "../../../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { list, service, slice, type KubeFixture } from "../../../support/fixtures.js";

const templates = loadTemplates();
const options = parseRenderOptions({ tcpServices: "db:3306", sslCert: "/etc/haproxy/lb.pem" });

/** A cluster state as a map of objects; every write bumps a global revision, like the API server. */
type State = Map<string, KubeFixture>;
const NAMES = ["a", "b", "c", "db", "web"];
const HOSTS = ["x.example.com", "y.example.com", "*.example.com", "bad host"];

const change = fc.record({
  name: fc.constantFrom(...NAMES),
  op: fc.constantFrom("endpoints", "host", "aclMatch", "delete", "ports", "twoPorts", "sslTerm", "recreate", "setting"),
  // Per-Service settings, among them some that show outside the backend (TCP frontends, redirect rules).
  setting: fc.constantFrom(
    "lb.timeout-client=1m",
    "lb.timeout-client=2h",
    "lb.ssl-redirect-code=302",
    "lb.ssl-redirect-code=308",
    "lb.ssl-redirect=false",
    "lb.ssl-redirect=true",
    "lb.maxconn=10",
    "lb.rate-limit-rps=bad",
  ),
  // A zone id is refused with the whole slice, as the API server would.
  ips: fc.array(fc.oneof(fc.ipV4(), fc.constant("fe80::1%eth0")), { maxLength: 5 }),
  host: fc.constantFrom(...HOSTS),
  // Paths that are free, shared, or another Service's own.
  path: fc.constantFrom("/a", "/shared", "/b/c", "/web/x", "/c:8080"),
  port: fc.constantFrom(80, 3306, 8080),
  // Duplicate numbers and unnamed ports make the Service one the validator refuses.
  second: fc.record({ port: fc.constantFrom(80, 8080), name: fc.constantFrom(undefined, "q", "p") }),
});

type Change = typeof change extends fc.Arbitrary<infer T> ? T : never;

function apply(state: State, c: Change, rv: number): void {
  const svcKey = `svc/${c.name}`;
  const current = state.get(svcKey);
  const annotations = { ...((current?.metadata.annotations as Record<string, string> | undefined) ?? {}) };
  const ports = (current?.spec as { ports?: Array<{ port: number; name?: string }> } | undefined)?.ports?.map((p) => ({
    port: p.port,
    name: p.name,
  })) ?? [{ port: c.port, name: "p" }];
  // Ages decide who owns a contested route: recreating a Service makes it the newest.
  let created =
    (current?.metadata.creationTimestamp as string | undefined) ??
    new Date(Date.UTC(2024, 0, 1, 0, 0, rv)).toISOString();
  const write = (): void => {
    state.set(svcKey, service(c.name, ports, { annotations, resourceVersion: String(rv), created }));
  };
  switch (c.op) {
    case "delete":
      state.delete(svcKey);
      state.delete(`slice/${c.name}`);
      return;
    case "endpoints":
      state.set(
        `slice/${c.name}`,
        slice(
          c.name,
          ports.map((p) => ({ name: p.name, port: p.port + 1000 })),
          c.ips,
          { name: `${c.name}-s`, resourceVersion: String(rv) },
        ),
      );
      if (!current) write();
      return;
    case "host":
      annotations["serviceloadbalancer/lb.host"] = c.host;
      write();
      return;
    case "aclMatch":
      annotations["serviceloadbalancer/lb.aclMatch"] = c.path;
      write();
      return;
    case "sslTerm":
      annotations["serviceloadbalancer/lb.sslTerm"] =
        annotations["serviceloadbalancer/lb.sslTerm"] === "true" ? "false" : "true";
      write();
      return;
    case "ports":
      ports.splice(0, ports.length, { port: c.port, name: "p" });
      write();
      return;
    case "twoPorts":
      ports.splice(0, ports.length, { port: c.port, name: "p" }, c.second);
      write();
      return;
    case "setting":
      annotations[`serviceloadbalancer/${c.setting.split("=")[0]}`] = c.setting.split("=")[1]!;
      write();
      return;
    case "recreate":
      created = new Date(Date.UTC(2024, 0, 1, 0, 0, rv)).toISOString();
      write();
      return;
  }
}

/** The objects in the order of their writes, or as the API server lists them (by namespace and name). */
function snapshot(state: State, rv: number, reuse?: ParsedItems, listOrder = false): Snapshot {
  const items = [...state.values()];
  if (listOrder)
    items.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  return { ...snapshotFromDocuments([list(items, String(rv))], reuse), trustedRevisions: true };
}

describe("the warm-instance cache", () => {
  it("renders exactly what a cold render gives, with the same digest, after any sequence of changes", () => {
    fc.assert(
      fc.property(
        fc.array(change, { minLength: 1, maxLength: 25 }),
        fc.boolean(),
        fc.constantFrom(...DIGEST_KINDS),
        (changes, listOrder, kind) => {
          const warm = new Renderer(templates);
          const cache = new ModelCache();
          const reuse = new ParsedItems();
          const hasher = configHasher(kind);
          const state: State = new Map();
          let rv = 1;
          for (const c of changes) {
            apply(state, c, ++rv);
            const cached = renderSnapshot(snapshot(state, rv, reuse, listOrder), options, warm, {}, cache, hasher);
            const cold = renderSnapshot(snapshot(state, rv, undefined, listOrder), options, new Renderer(templates));
            expect(cached.bytes.equals(cold.bytes)).toBe(true);
            expect(cached.sha256).toBe(configDigest(kind, cold.bytes));
            expect(cached.warnings).toEqual(cold.warnings);
            expect(cached.skipped).toEqual(cold.skipped);
          }
        },
      ),
      {
        numRuns: 150,
        // Found by this property before Services with a repeated port number were refused: two
        // backends of one name, and a warm render that differed from a cold one.
        examples: [
          [
            [
              {
                name: "c",
                op: "aclMatch",
                ips: [],
                host: "x.example.com",
                path: "/a",
                port: 80,
                second: { port: 80, name: undefined },
                setting: "lb.maxconn=10",
              },
              {
                name: "c",
                op: "twoPorts",
                ips: [],
                host: "x.example.com",
                path: "/a",
                port: 80,
                second: { port: 80, name: undefined },
                setting: "lb.maxconn=10",
              },
              {
                name: "c",
                op: "endpoints",
                ips: ["0.0.0.1"],
                host: "x.example.com",
                path: "/a",
                port: 80,
                second: { port: 80, name: undefined },
                setting: "lb.maxconn=10",
              },
            ],
            false,
            "sha256",
          ],
        ],
      },
    );
  });

  it("is not used for snapshots whose resourceVersions it cannot trust (files)", () => {
    const cache = new ModelCache();
    const renderer = new Renderer(templates);
    const v1 = snapshotFromDocuments([
      list([service("web", [{ port: 80 }]), slice("web", [{ port: 80 }], ["10.0.0.1"])]),
    ]);
    const v2 = snapshotFromDocuments([
      list([service("web", [{ port: 80 }]), slice("web", [{ port: 80 }], ["10.0.0.2"])]),
    ]);
    renderSnapshot(v1, options, renderer, {}, cache);
    expect(renderSnapshot(v2, options, renderer, {}, cache).config).toContain("10.0.0.2:80");
    expect(cache.size).toBe(0);
  });

  it("plans only what changed, and renders what a cold render gives, while the list keeps its objects in place", () => {
    const step = fc.record({
      name: fc.constantFrom(...NAMES),
      op: fc.constantFrom("endpoints", "host", "relabel"),
      ips: fc.array(fc.ipV4(), { maxLength: 4 }),
      host: fc.constantFrom(...HOSTS),
      owner: fc.constantFrom(...NAMES, "gone"),
    });
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 20 }), fc.constantFrom(...DIGEST_KINDS), (steps, kind) => {
        const warm = new Renderer(templates);
        const cache = new ModelCache();
        const reuse = new ParsedItems();
        const hasher = configHasher(kind);
        const state: State = new Map();
        const port = [{ name: "p", port: 8080 }];
        for (const name of NAMES) {
          state.set(`svc/${name}`, service(name, [{ port: 80, name: "p" }], { resourceVersion: "1" }));
          state.set(`slice/${name}`, slice(name, port, ["10.0.0.1"], { name: `${name}-s`, resourceVersion: "1" }));
        }
        renderSnapshot(snapshot(state, 1, reuse, true), options, warm, {}, cache, hasher);
        let rv = 1;
        let full = 0;
        for (const s of steps) {
          rv++;
          const owned = (owner: string, ips: string[]) =>
            slice(owner, port, ips, { name: `${s.name}-s`, resourceVersion: String(rv) });
          if (s.op === "endpoints") state.set(`slice/${s.name}`, owned(s.name, s.ips));
          else if (s.op === "relabel") state.set(`slice/${s.name}`, owned(s.owner, s.ips));
          else
            state.set(
              `svc/${s.name}`,
              service(s.name, [{ port: 80, name: "p" }], {
                resourceVersion: String(rv),
                annotations: { "serviceloadbalancer/lb.host": s.host },
              }),
            );
          const generation = cache.generation;
          const cached = renderSnapshot(snapshot(state, rv, reuse, true), options, warm, {}, cache, hasher);
          if (cache.generation !== generation) full++;
          const cold = renderSnapshot(snapshot(state, rv, undefined, true), options, new Renderer(templates));
          expect(cached.bytes.equals(cold.bytes)).toBe(true);
          expect(cached.sha256).toBe(configDigest(kind, cold.bytes));
          expect(cached.stats).toMatchObject({ servers: cold.stats.servers, backends: cold.stats.backends });
          expect(cached.warnings).toEqual(cold.warnings);
        }
        // Every step replaces objects in place: no step needs a pass over every Service.
        expect(full).toBe(0);
      }),
      { numRuns: 100 },
    );
  });

  it("plans only the Services whose objects were replaced when the list is the last one with a few objects changed", () => {
    const cache = new ModelCache();
    const reuse = new ParsedItems();
    const state: State = new Map();
    for (const name of NAMES) {
      state.set(`svc/${name}`, service(name, [{ port: 80, name: "p" }], { resourceVersion: "2" }));
      state.set(`slice/${name}`, slice(name, [{ name: "p", port: 8080 }], ["10.0.0.1"], { resourceVersion: "2" }));
    }
    const first = buildModel(snapshot(state, 2, reuse, true), options, {}, cache);
    const generation = cache.generation;
    state.set(`slice/db`, slice("db", [{ name: "p", port: 8080 }], ["10.0.0.2"], { resourceVersion: "3" }));
    const moved = buildModel(snapshot(state, 3, reuse, true), options, {}, cache);
    // A full pass over every Service starts a new generation of the plan cache; this one did not.
    expect(cache.generation).toBe(generation);
    expect(moved.backends.filter((b, i) => b !== first.backends[i]).map((b) => b.name)).toEqual(["default_db_80"]);
    expect(new Renderer(templates).render(moved)).toBe(
      new Renderer(templates).render(buildModel(snapshot(state, 3), options)),
    );
    expect(moved.readyServers).toBe(NAMES.length);
  });

  it("swaps in the changed backend without settling routes again when only endpoints moved", () => {
    const cache = new ModelCache();
    const objects = (ip: string, rv: string) => [
      service("api", [{ port: 80 }], {
        resourceVersion: "5",
        annotations: { "serviceloadbalancer/lb.host": "api.example.com" },
      }),
      slice("api", [{ port: 80 }], ["10.0.0.9"], { resourceVersion: "6" }),
      service("web", [{ port: 80 }], { resourceVersion: "7" }),
      slice("web", [{ port: 80 }], [ip], { resourceVersion: rv }),
    ];
    const live = (ip: string, rv: string): Snapshot => ({
      ...snapshotFromDocuments([list(objects(ip, rv), rv)]),
      trustedRevisions: true,
    });
    const first = buildModel(live("10.0.0.1", "10"), options, {}, cache);
    const moved = buildModel(live("10.0.0.2", "11"), options, {}, cache);
    expect(moved.httpRoutes).toBe(first.httpRoutes);
    expect(moved.backends[0]).toBe(first.backends[0]);
    expect(moved.backends[1]).not.toBe(first.backends[1]);
    expect(moved.revision).toBe("11");
    expect(new Renderer(templates).render(moved)).toBe(
      new Renderer(templates).render(buildModel(live("10.0.0.2", "11"), options)),
    );
    // Losing the last endpoint changes no claim either: the backend stays, every slot free.
    const noEndpoints = (): Snapshot => ({
      ...snapshotFromDocuments([list(objects("10.0.0.2", "12").slice(0, 3), "12")]),
      trustedRevisions: true,
    });
    const empty = buildModel(noEndpoints(), options, {}, cache);
    expect(empty.httpRoutes).toBe(moved.httpRoutes);
    expect(empty.backends[1]!.servers.every((address) => address === null)).toBe(true);
    expect(new Renderer(templates).render(empty)).toBe(
      new Renderer(templates).render(buildModel(noEndpoints(), options)),
    );
  });
});
