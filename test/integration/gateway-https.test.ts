/*
 * Gateway HTTPS listeners through a real HAProxy with real TLS (conformance: HTTPSListener): the
 * certificate files a node holds in its --gateway-cert-dir, scanned as the agent scans them and
 * reported by name, are what the render binds, from the path HAProxy's environment gives; the
 * handshake picks the certificate by SNI and the routes pick the backend by the Host header.
 * A config naming a file the node lacks is refused by `haproxy -c`: why a listener is bound only
 * with the certificates every node holds. And a port binds as many certificates as one bind line
 * holds.
 */
import { cpSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scanGatewayCertificates } from "../../shared/agent/gateway-certificates.js";
import { loadTemplates } from "../../shared/adapters/templates.js";
import { fleetCertificates, UNREAD } from "../../shared/app/fleet-certificates.js";
import type { HeldCertificates } from "../../shared/core/gateway/certificates.js";
import { MAX_PORT_CERTIFICATES } from "../../shared/core/gateway/listeners.js";
import { snapshotFromDocuments } from "../../shared/core/kubernetes/snapshot.js";
import { renderSnapshot } from "../../shared/core/render/pipeline.js";
import { Renderer } from "../../shared/core/render/render.js";
import { agentReport, list, service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute, referenceGrant } from "../support/gateway-fixtures.js";
import {
  haproxyCheck,
  loopbackOptions,
  requireHaproxy,
  runHaproxy,
  type LoopbackSetup,
  type RunningHaproxy,
} from "../support/haproxy.js";
import { echoBackend, type EchoBackend, freePort } from "../support/net.js";
import { httpsGet, issueServerCert, makePki, type TestPki } from "../support/tls.js";

describe("Gateway HTTPS listeners through a real HAProxy", () => {
  const be: Record<string, EchoBackend> = {};
  let setup: LoopbackSetup;
  let pki: TestPki;
  let certDir: string;
  let env: NodeJS.ProcessEnv;
  let hx: RunningHaproxy;
  let port: number;
  let items: unknown[];
  const renderer = new Renderer(loadTemplates());
  const render = (held: HeldCertificates) =>
    renderSnapshot(snapshotFromDocuments([list(items)]), setup.options, renderer, { gatewayCertificates: held });

  beforeAll(async () => {
    requireHaproxy();
    for (const n of ["site", "other"]) be[n] = await echoBackend(n);
    setup = await loopbackOptions();
    do port = await freePort();
    while (port === setup.options.httpPort || port === setup.options.statsPort);
    pki = makePki(setup.dir);
    certDir = join(setup.dir, "gateway-certs");
    env = { ...process.env, SERVICELB_GATEWAY_CERT_DIR: certDir };
    const put = (ref: string, host: string) => {
      const c = issueServerCert(setup.dir, host);
      mkdirSync(join(certDir, ref, ".."), { recursive: true });
      writeFileSync(join(certDir, `${ref}.pem`), c.cert + c.key);
    };
    put("default/site", "site.example.com");
    put("certs/other", "other.example.net");
    const backend = (name: string) => [
      service(name, [{ port: 8080, name: "http" }]),
      slice(name, [{ name: "http", port: be[name]!.port }], ["127.0.0.1"]),
    ];
    const routeTo = (name: string, hostname: string) =>
      httpRoute(name, {
        parentRefs: [{ name: "gw" }],
        hostnames: [hostname],
        rules: [{ backendRefs: [{ name, port: 8080 }] }],
      });
    items = [
      gatewayClass(),
      gateway("gw", [
        {
          name: "https",
          port,
          protocol: "HTTPS",
          tls: { certificateRefs: [{ name: "site" }, { name: "other", namespace: "certs" }] },
        },
      ]),
      referenceGrant("gateways", "certs", { namespace: "default", kind: "Gateway" }, { kind: "Secret" }),
      routeTo("site", "site.example.com"),
      routeTo("other", "other.example.net"),
      ...backend("site"),
      ...backend("other"),
    ];
    // What the agent finds in its directory and reports, as the function reads it.
    const scan = await scanGatewayCertificates(certDir);
    expect(scan).toEqual({ held: ["certs/other", "default/site"], refused: [] });
    const held = fleetCertificates(UNREAD, [{ ...agentReport("n1"), gatewayCertificates: scan.held }], true);
    const result = render(held);
    expect(result.gatewayStatus!.gateways[0]!.listeners[0]!.conditions).toContainEqual(
      expect.objectContaining({ type: "ResolvedRefs", status: "True" }),
    );
    hx = await runHaproxy(result.config, setup.dir, env);
  });

  afterAll(async () => {
    await hx?.stop();
    for (const b of Object.values(be)) await b.close();
    setup?.cleanup();
  });

  it("answers each route over TLS with the certificate its SNI names (HTTPSListener)", async () => {
    expect(await httpsGet(port, pki, "site.example.com")).toEqual({
      status: 200,
      body: "site /",
      served: "site.example.com",
    });
    expect(await httpsGet(port, pki, "other.example.net", "other.example.net", "/x")).toEqual({
      status: 200,
      body: "other /x",
      served: "other.example.net",
    });
  });

  it("routes by the Host header, as HTTP does, and answers 404 to a host no route names", async () => {
    expect((await httpsGet(port, pki, "site.example.com", "other.example.net")).body).toBe("other /");
    expect((await httpsGet(port, pki, "site.example.com", "nobody.example.org")).status).toBe(404);
  });

  it("binds only what the node holds: a config that named a file it lacks would not load", () => {
    const withAbsent = items.map((o) =>
      (o as { kind: string }).kind === "Gateway"
        ? gateway("gw", [
            {
              name: "https",
              port,
              protocol: "HTTPS",
              tls: { certificateRefs: [{ name: "site" }, { name: "other", namespace: "certs" }, { name: "absent" }] },
            },
          ])
        : o,
    );
    const renderOf = (held: string[]) =>
      renderSnapshot(snapshotFromDocuments([list(withAbsent)]), setup.options, renderer, {
        gatewayCertificates: { holders: [{ name: "node n1", certificates: held }], unknown: "" },
      });
    const truthful = renderOf(["certs/other", "default/site"]);
    expect(truthful.config).not.toContain("absent.pem");
    expect(truthful.warnings.map((w) => w.message).join("\n")).toContain(
      "certificate default/absent (default/absent.pem): not held by node n1",
    );
    expect(haproxyCheck(truthful.config, setup.dir, env).ok).toBe(true);
    // Had the function bound a file the node lacks, the node could take no config at all.
    const lie = renderOf(["certs/other", "default/site", "default/absent"]);
    expect(lie.config).toContain('crt "${SERVICELB_GATEWAY_CERT_DIR}/default/absent.pem"');
    expect(haproxyCheck(lie.config, setup.dir, env).ok).toBe(false);
    // Without --gateway-cert-dir the variable is unset (the agent's admission refuses such a config first).
    expect(haproxyCheck(truthful.config, setup.dir, { ...process.env, SERVICELB_GATEWAY_CERT_DIR: "" }).ok).toBe(false);
  });

  it(`binds as many certificates on a port as one bind line holds (${MAX_PORT_CERTIFICATES}), and HAProxy loads them`, () => {
    const names = Array.from({ length: MAX_PORT_CERTIFICATES + 1 }, (_, i) => `c${i}`);
    mkdirSync(join(certDir, "many"), { recursive: true });
    for (const n of names) cpSync(join(certDir, "default", "site.pem"), join(certDir, "many", `${n}.pem`));
    const many = [
      gatewayClass(),
      gateway(
        "gw",
        [{ name: "https", port, protocol: "HTTPS", tls: { certificateRefs: names.map((name) => ({ name })) } }],
        { namespace: "many" },
      ),
      httpRoute(
        "r",
        {
          parentRefs: [{ name: "gw" }],
          rules: [{ backendRefs: [{ name: "site", port: 8080, namespace: "default" }] }],
        },
        { namespace: "many" },
      ),
    ];
    const result = renderSnapshot(snapshotFromDocuments([list(many)]), setup.options, renderer, {
      gatewayCertificates: { holders: [{ name: "node n1", certificates: names.map((n) => `many/${n}`) }], unknown: "" },
    });
    const bind = result.config.split("\n").find((l) => l.includes(`:${port} ssl`))!;
    expect(bind.match(/ crt /g)).toHaveLength(MAX_PORT_CERTIFICATES);
    expect(haproxyCheck(result.config, setup.dir, env).ok).toBe(true);
  });
});
