/*
 * A Gateway HTTPS listener served by a real agent and HAProxy: the agent finds the certificate
 * file in its --gateway-cert-dir and reports it to the store by name; the config rendered from
 * that report binds it from the path the agent gives HAProxy (SERVICELB_GATEWAY_CERT_DIR); the
 * agent's `haproxy -c` and reload take it, and the route answers over TLS; a renewed file is
 * swapped in without a reload.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fleetCertificates, UNREAD } from "../../shared/app/fleet-certificates.js";
import { A, agentWorld } from "../support/agent.js";
import { service, slice } from "../support/fixtures.js";
import { gateway, gatewayClass, httpRoute } from "../support/gateway-fixtures.js";
import { freePort, waitFor } from "../support/net.js";
import { httpsGet, issueServerCert, makePki } from "../support/tls.js";

const world = agentWorld();

describe("an agent with --gateway-cert-dir", () => {
  it("reports the certificates it holds by name, and serves the HTTPS listener a config binds with them", async () => {
    const pkiDir = mkdtempSync(join(tmpdir(), "servicelb-gw-pki-"));
    world.cleanups.push(() => rmSync(pkiDir, { recursive: true, force: true }));
    const pki = makePki(pkiDir);
    const site = issueServerCert(pkiDir, "site.example.com");
    const n = await world.node();
    const certDir = join(n.dir, "gateway-certs");
    mkdirSync(join(certDir, "default"), { recursive: true });
    writeFileSync(join(certDir, "default", "site.pem"), site.cert + site.key);

    const first = await n.publish(
      [service("web", [{ port: 80, targetPort: world.pods.port }]), slice("web", [{ port: world.pods.port }], [A])],
      100,
    );
    const agent = await world.start(n, { gatewayCertDir: certDir, certificateInterval: "200ms" });
    await world.appliedKey(agent, first.key);
    expect(agent.status().gatewayCertificates).toEqual(["default/site"]);
    const reports = await waitFor("the report with the certificates", async () => {
      const read = await n.store.readStatuses();
      return read.reports.some((r) => (r as { gatewayCertificates?: unknown }).gatewayCertificates)
        ? read.reports
        : undefined;
    });
    expect(JSON.stringify(reports)).not.toContain("PRIVATE KEY");

    // The function's side: what the reports say every node holds is what the listener binds.
    n.renderContext.useCertificates(fleetCertificates(UNREAD, reports, true));
    const port = await freePort();
    const published = await n.publish(
      [
        service("web", [{ port: 80, targetPort: world.pods.port }]),
        slice("web", [{ port: world.pods.port }], [A]),
        gatewayClass(),
        gateway("gw", [{ name: "https", port, protocol: "HTTPS", tls: { certificateRefs: [{ name: "site" }] } }]),
        httpRoute("r", {
          parentRefs: [{ name: "gw" }],
          hostnames: ["site.example.com"],
          rules: [{ backendRefs: [{ name: "web", port: 80 }] }],
        }),
      ],
      101,
    );
    expect(n.lastConfig()).toContain('crt "${SERVICELB_GATEWAY_CERT_DIR}/default/site.pem"');
    expect((await n.notify(agent, published)).status).toBe(202);
    await world.appliedKey(agent, published.key);
    const answer = await httpsGet(port, pki, "site.example.com");
    expect(answer).toMatchObject({ status: 200, served: "site.example.com" });
    expect(answer.body.startsWith("A ")).toBe(true);

    // A renewed file is swapped in without a reload, as --ssl-cert files are.
    const renewed = issueServerCert(pkiDir, "site.example.com");
    writeFileSync(join(certDir, "default", "site.pem"), renewed.cert + renewed.key);
    await waitFor("the renewed certificate swapped in", async () =>
      agent.status().certificates?.lastSwap?.certificate === join(certDir, "default", "site.pem") ? true : undefined,
    );
    expect(agent.status().gatewayCertificates).toEqual(["default/site"]);

    // A file that goes is reported gone: the function stops binding it.
    rmSync(join(certDir, "default", "site.pem"));
    await waitFor("the certificate reported gone", async () =>
      agent.status().gatewayCertificates?.length === 0 ? true : undefined,
    );
  });
});
