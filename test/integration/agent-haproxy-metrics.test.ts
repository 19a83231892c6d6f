import { get } from "node:http";
import { gunzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { STATS_PASSWORD_VARIABLE } from "../../shared/core/render/template-views.js";
import { A, agentWorld, B } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";

// GET /metrics/haproxy of a real agent in front of its real HAProxy: only the families asked
// for, whole (HELP, TYPE, every backend's sample), gzipped on request, a small fraction of the
// exporter's own page; refusals for anything but family names; the stats user enforced as
// HAProxy enforces it.

const world = agentWorld();

const SERVICES = 40;
const FAMILIES = [
  "haproxy_backend_http_requests_total",
  "haproxy_backend_active_servers",
  "haproxy_process_current_connections",
];

function cluster(): unknown[] {
  return Array.from({ length: SERVICES }, (_, i) => [
    service(`svc-${i}`, [{ port: 80, targetPort: world.pods.port }]),
    slice(`svc-${i}`, [{ port: world.pods.port }], [i % 2 ? A : B]),
  ]).flat();
}

const query = (families: string[]) => families.map((f) => `family=${f}`).join("&");

/** Status, headers and body bytes as sent (fetch would undo the gzip). */
function raw(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
    get(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    }).on("error", reject);
  });
}

/** The family of each HELP, TYPE and sample line. */
function families(page: string): Set<string> {
  return new Set(
    page
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => (l.startsWith("#") ? l.split(" ")[2]! : l.split(/[{ ]/)[0]!)),
  );
}

describe("GET /metrics/haproxy", () => {
  afterEach(() => {
    delete process.env[STATS_PASSWORD_VARIABLE];
  });

  it("serves only the families named, whole, far smaller than HAProxy's own page", async () => {
    const n = await world.node({ spareBackends: 8 });
    await n.publish(cluster(), 100);
    const agent = await world.start(n);
    await n.get("/svc-1/x");

    const r = await raw(`${agent.url}/metrics/haproxy?${query(FAMILIES)}`);
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
    const page = r.body.toString();
    expect(families(page)).toEqual(new Set(FAMILIES));
    for (const f of FAMILIES) {
      expect(page).toContain(`# HELP ${f} `);
      expect(page).toContain(`# TYPE ${f} `);
    }
    // Every backend's sample: the Services', the spares' and the default page's.
    const backends = [...n.lastConfig().matchAll(/^backend (\S+)/gm)].map((m) => m[1]!);
    expect(backends.length).toBeGreaterThan(SERVICES + 8);
    const requests = page.split("\n").filter((l) => l.startsWith("haproxy_backend_http_requests_total{"));
    for (const b of backends)
      expect(
        requests.some((l) => l.includes(`proxy="${b}"`)),
        b,
      ).toBe(true);
    expect(page).toMatch(/^haproxy_backend_http_requests_total\{proxy="default_svc-1_80"\} [1-9]/m);

    // HAProxy's own page with the query the PodMonitor sent it before (global, frontend, backend).
    const exporter = `http://127.0.0.1:${n.lb.options.statsPort}/metrics?no-maint=&scope=global&scope=frontend&scope=backend`;
    const unfiltered = (await raw(exporter)).body.length;
    expect(r.body.length).toBeLessThan(unfiltered / 20);

    // Gzipped for a scraper that asks, as /metrics is.
    const z = await raw(`${agent.url}/metrics/haproxy?${query(FAMILIES)}`, { "accept-encoding": "gzip" });
    expect(z.headers["content-encoding"]).toBe("gzip");
    expect(z.body.length).toBeLessThan(r.body.length / 4);
    expect(families(gunzipSync(z.body).toString())).toEqual(new Set(FAMILIES));
  });

  it("refuses anything but family names of HAProxy's exporter, and says so", async () => {
    const n = await world.node();
    await n.publish(cluster().slice(0, 2), 100);
    const agent = await world.start(n);
    const refused = async (search: string) => {
      const r = await fetch(`${agent.url}/metrics/haproxy${search}`);
      expect(r.status, search).toBe(400);
      return ((await r.json()) as { error: string }).error;
    };
    expect(await refused("")).toMatch(/^name the families to keep/);
    expect(await refused("?family=haproxy_backend_http_requests_total&url=http://169.254.169.254/")).toMatch(
      /^unknown query parameter url/,
    );
    expect(await refused("?family=haproxy_backend_x&scope=server")).toMatch(/^unknown query parameter scope/);
    expect(await refused("?family=node_cpu_seconds_total")).toMatch(/a family of HAProxy's exporter/);
    expect(await refused("?family=haproxy_backend_x/../../admin")).toMatch(/a family of HAProxy's exporter/);
    expect(await refused(`?${query(Array.from({ length: 65 }, (_, i) => `haproxy_backend_f${i}`))}`)).toBe(
      "at most 64 families",
    );
    expect((await fetch(`${agent.url}/metrics/haproxy?family=haproxy_backend_x`, { method: "POST" })).status).toBe(405);
  });

  it("answers 503 while no config runs", async () => {
    const n = await world.node();
    const agent = await world.start(n);
    const r = await fetch(`${agent.url}/metrics/haproxy?family=haproxy_backend_http_requests_total`);
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: string }).error).toMatch(/^no exporter to read: no config runs yet/);
  });

  it("asks for the stats user where the config protects the stats page, and passes the caller's to HAProxy", async () => {
    process.env[STATS_PASSWORD_VARIABLE] = "stats-pass-0123";
    const n = await world.node({ statsUser: "admin" });
    const published = await n.publish(cluster().slice(0, 2), 100);
    const agent = await world.start(n);
    await world.appliedKey(agent, published.key);
    const url = `${agent.url}/metrics/haproxy?family=haproxy_backend_http_requests_total`;
    const basic = (user: string, password: string) => ({
      authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
    });

    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Basic realm="?servicelb/);
    expect((await fetch(url, { headers: basic("admin", "wrong") })).status).toBe(401);
    const r = await fetch(url, { headers: basic("admin", "stats-pass-0123") });
    expect(r.status).toBe(200);
    expect(families(await r.text())).toEqual(new Set(["haproxy_backend_http_requests_total"]));
  });
});
