import { request as httpsRequest } from "node:https";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseRenderOptions } from "../../shared/core/settings/options.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { list, service, slice } from "../support/fixtures.js";
import { loopbackOptions, requireHaproxy, runHaproxy } from "../support/haproxy.js";
import { echoBackend, freePort, httpGet } from "../support/net.js";
import { makePki } from "../support/tls.js";

const renderer = new Renderer(loadTemplates());

describe("cookie stickiness", () => {
  it("keeps a client on its pod when endpoints are added and reordered", async () => {
    requireHaproxy();
    const pods = await Promise.all(["p1", "p2", "p3"].map((n) => echoBackend(n)));
    const setup = await loopbackOptions();
    // Pods are told apart by port; the Service's slices name them in different orders.
    const cluster = (ports: number[]) =>
      snapshotFromDocuments([
        list([
          service("shop", [{ port: 80 }], { annotations: { "serviceloadbalancer/lb.cookie-sticky-session": "true" } }),
          ...ports.map((p, i) => slice("shop", [{ port: p }], ["127.0.0.1"], { name: `shop-${i}` })),
        ]),
      ]);
    const first = renderSnapshot(cluster([pods[0]!.port, pods[1]!.port]), setup.options, renderer).config;
    let hx = await runHaproxy(first, setup.dir);
    try {
      const r = await httpGet(setup.options.httpPort, "/shop/");
      const cookie = /SERVERID=[^;]+/.exec(String(r.headers["set-cookie"]))![0];
      const owner = r.body.split(" ")[0];
      for (let i = 0; i < 4; i++)
        expect((await httpGet(setup.options.httpPort, "/shop/", { cookie })).body.split(" ")[0]).toBe(owner);

      await hx.stop();
      const second = renderSnapshot(
        cluster([pods[2]!.port, pods[1]!.port, pods[0]!.port]),
        setup.options,
        renderer,
      ).config;
      expect(second).not.toBe(first);
      hx = await runHaproxy(second, setup.dir);
      for (let i = 0; i < 4; i++)
        expect((await httpGet(setup.options.httpPort, "/shop/", { cookie })).body.split(" ")[0]).toBe(owner);
    } finally {
      await hx.stop();
      await Promise.all(pods.map((p) => p.close()));
      setup.cleanup();
    }
  });
});

function httpsGet(
  port: number,
  path: string,
  opts: { ca: string; cert?: string; key?: string },
): Promise<{ status: number; body: string; hsts?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port,
        path,
        servername: "lb.test",
        ca: opts.ca,
        cert: opts.cert,
        key: opts.key,
        agent: false,
        headers: { host: "lb.test" },
      },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            hsts: res.headers["strict-transport-security"] as string | undefined,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("TLS termination", () => {
  it("serves lb.sslTerm Services on HTTPS only to clients with a certificate the CA signed, and redirects HTTP", async () => {
    requireHaproxy();
    const pod = await echoBackend("secure");
    const setup = await loopbackOptions();
    const pki = makePki(setup.dir);
    const httpsPort = await freePort();
    const options = parseRenderOptions({
      ...setup.options,
      tcpServices: "",
      selector: undefined,
      sslCert: pki.serverPem,
      sslCaCert: pki.caFile,
      httpsPort,
      hstsMaxAge: "600",
    });
    const { config } = renderSnapshot(
      snapshotFromDocuments([
        list([
          service("pay", [{ port: 80 }], { annotations: { "serviceloadbalancer/lb.sslTerm": "true" } }),
          slice("pay", [{ port: pod.port }], ["127.0.0.1"]),
        ]),
      ]),
      options,
      renderer,
    );
    const hx = await runHaproxy(config, setup.dir);
    try {
      const ok = await httpsGet(httpsPort, "/pay/x", {
        ca: pki.ca,
        cert: readFileSync(pki.clientCert, "utf8"),
        key: readFileSync(pki.clientKey, "utf8"),
      });
      expect(ok).toEqual({ status: 200, body: "secure /x", hsts: "max-age=600" });
      await expect(httpsGet(httpsPort, "/pay/x", { ca: pki.ca })).rejects.toThrow();
      const plain = await httpGet(options.httpPort, "/pay/x", { host: "lb.test" });
      expect(plain.status).toBe(301);
      expect(plain.headers.location).toBe(`https://lb.test:${httpsPort}/pay/x`);
      expect(pod.seen.map((s) => s.headers["x-forwarded-proto"])).toEqual(["https"]);
    } finally {
      await hx.stop();
      await pod.close();
      setup.cleanup();
    }
  });
});

describe("stats page", () => {
  it("with --stats-user, the page and /metrics need the password HAProxy reads from its environment", async () => {
    requireHaproxy();
    const setup = await loopbackOptions();
    const options = parseRenderOptions({ ...setup.options, tcpServices: "", selector: undefined, statsUser: "admin" });
    const { config } = renderSnapshot(snapshotFromDocuments([list([])]), options, renderer);
    expect(config).not.toContain("s3cret");
    process.env.SERVICELB_STATS_PASSWORD = "s3cret";
    const hx = await runHaproxy(config, setup.dir).finally(() => delete process.env.SERVICELB_STATS_PASSWORD);
    try {
      const basic = (cred: string) => ({ authorization: `Basic ${Buffer.from(cred).toString("base64")}` });
      for (const path of ["/", "/metrics"]) {
        expect((await httpGet(options.statsPort, path)).status).toBe(401);
        expect((await httpGet(options.statsPort, path, basic("admin:"))).status).toBe(401);
        expect((await httpGet(options.statsPort, path, basic("admin:wrong"))).status).toBe(401);
        expect((await httpGet(options.statsPort, path, basic("admin:s3cret"))).status).toBe(200);
      }
    } finally {
      await hx.stop();
      setup.cleanup();
    }
  });
});
