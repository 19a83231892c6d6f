import { get } from "node:http";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { showProc } from "../../shared/adapters/haproxy/master.js";
import { runtimeCommand } from "../../shared/adapters/haproxy/runtime.js";
import type { Agent } from "../../shared/agent/agent.js";
import { SERVICE_MAP } from "../../shared/core/haproxy-config/service-map.js";
import { A, agentWorld, B, C, type Node } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";

// The info series that join HAProxy's per-backend and per-slot series to Services, read from the
// agent's real /metrics and HAProxy's real exporter: they follow a Service into a spare and out of
// it through the runtime API (0 reloads), HAProxy's own map changes with them, and every label
// they join on is one HAProxy's exporter has.

const world = agentWorld();
const { node, start, appliedKey } = world;

function svc(name: string, pods: string[], namespace = "default"): unknown[] {
  return [
    service(name, [{ port: 80, targetPort: world.pods.port }], { namespace }),
    slice(name, [{ port: world.pods.port }], pods, { namespace }),
  ];
}

async function apply(n: Node, agent: Agent, items: unknown[], revision: number) {
  const published = await n.publish(items, revision);
  await n.notify(agent, published);
  await appliedKey(agent, published.key);
  return agent.status().applied;
}

type Labels = Record<string, string>;

/** The label sets of `name`'s samples in a Prometheus text page. */
function samples(page: string, name: string): Labels[] {
  const out: Labels[] = [];
  for (const line of page.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const labels: Labels = {};
    for (const m of line.slice(name.length + 1, line.lastIndexOf("}")).matchAll(/(\w+)="([^"]*)"/g))
      labels[m[1]!] = m[2]!;
    out.push(labels);
  }
  return out;
}

async function scrape(url: string): Promise<string> {
  const r = await fetch(url);
  expect(r.status).toBe(200);
  return r.text();
}

const backendInfo = (page: string) =>
  samples(page, "servicelb_backend_info")
    .map((l) => `${l.proxy} ${l.service_namespace}/${l.service_name}/${l.service_port}`)
    .sort();
const serverInfo = (page: string) =>
  samples(page, "servicelb_server_info")
    .map((l) => `${l.proxy}/${l.server} ${l.address}`)
    .sort();

describe("servicelb_backend_info and servicelb_server_info", () => {
  it("follow a Service into a spare and out of it with 0 reloads, and join HAProxy's exporter on proxy and server", async () => {
    const n = await node({ spareBackends: 2 });
    const port = world.pods.port;
    const web = svc("web", [A]);
    await n.publish(web, 100);
    const agent = await start(n);
    const haproxyMetrics = `http://127.0.0.1:${n.lb.options.statsPort}/metrics`;
    const socket = n.lb.options.statsSocket;
    const master = (await showProc(n.masterSocket)).master;

    let page = await scrape(`${agent.url}/metrics`);
    expect(backendInfo(page)).toEqual(["default_web_80 default/web/80"]);
    expect(serverInfo(page)).toEqual([expect.stringMatching(new RegExp(`^default_web_80/s\\d+ ${A}:${port}$`))]);
    expect(samples(page, "servicelb_agent_config_info")).toEqual([
      { key: agent.status().applied!.key!, sha256: agent.status().applied!.sha256 },
    ]);

    // A Service into a spare: the spare's map line and slot change in HAProxy and in the series.
    expect(await apply(n, agent, [...web, ...svc("api", [B, C], "shop")], 110)).toMatchObject({ how: "runtime" });
    expect(await runtimeCommand(socket, `show map ${SERVICE_MAP}`)).toMatch(/ spare_1 shop\/api\/80$/m);
    page = await scrape(`${agent.url}/metrics`);
    expect(backendInfo(page)).toEqual(["default_web_80 default/web/80", "spare_1 shop/api/80"]);
    const spareSlots = serverInfo(page).filter((s) => s.startsWith("spare_1/"));
    expect(spareSlots.map((s) => s.split(" ")[1]).sort()).toEqual([`${B}:${port}`, `${C}:${port}`]);

    // Every proxy and slot the info series name is one HAProxy's exporter reports, by the same labels.
    const exporter = await scrape(haproxyMetrics);
    const proxies = new Set(samples(exporter, "haproxy_backend_status").map((l) => l.proxy));
    for (const l of samples(page, "servicelb_backend_info")) expect(proxies).toContain(l.proxy);
    const slots = new Set(samples(exporter, "haproxy_server_status").map((l) => `${l.proxy}/${l.server}`));
    for (const l of samples(page, "servicelb_server_info")) expect(slots).toContain(`${l.proxy}/${l.server}`);

    // Gone again: the spare is free, and neither it nor its slots have a series.
    expect(await apply(n, agent, web, 120)).toMatchObject({ how: "runtime" });
    expect(await runtimeCommand(socket, `show map ${SERVICE_MAP}`)).not.toContain("spare_1");
    page = await scrape(`${agent.url}/metrics`);
    expect(backendInfo(page)).toEqual(["default_web_80 default/web/80"]);
    expect(serverInfo(page).filter((s) => s.startsWith("spare_1/"))).toEqual([]);

    // Compressed for a scraper that asks, as Prometheus does; the same page.
    const raw = await new Promise<{ encoding?: string; body: Buffer }>((resolve, reject) =>
      get(`${agent.url}/metrics`, { headers: { "accept-encoding": "gzip" } }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ encoding: res.headers["content-encoding"], body: Buffer.concat(chunks) }));
      }).on("error", reject),
    );
    expect(raw.encoding).toBe("gzip");
    expect(backendInfo(gunzipSync(raw.body).toString("utf8"))).toEqual(["default_web_80 default/web/80"]);

    const after = (await showProc(n.masterSocket)).master;
    expect(after.pid).toBe(master.pid);
    expect(after.reloads).toBe(master.reloads);
  });
});
