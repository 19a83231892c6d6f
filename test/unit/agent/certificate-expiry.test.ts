import { describe, expect, it } from "vitest";
import { certificateProbe } from "../../../shared/agent/certificate-expiry.js";

// The probe behind servicelb_certificate_expiry_timestamp_seconds: HAProxy asked once per config
// (a crt-list can hold thousands of certificates), and a failed read never empties the series.

const config = (socket: string) => `global\n    stats socket ${socket} mode 600 level admin\n`;
const cert = { certificate: "/etc/haproxy/certs/lb.pem", notAfter: new Date("2027-01-01T00:00:00Z") };

describe("certificateProbe", () => {
  it("asks HAProxy's socket once per config, again when the config changes", async () => {
    let running = { text: config("/run/a.sock"), key: "k1", sha256: "s1" };
    const asked: string[] = [];
    const probe = certificateProbe(
      () => running,
      async (socket) => {
        asked.push(socket);
        return [cert];
      },
    );
    expect(await probe()).toEqual([cert]);
    expect(await probe()).toEqual([cert]);
    expect(asked).toEqual(["/run/a.sock"]);
    running = { text: config("/run/b.sock"), key: "k2", sha256: "s2" };
    await probe();
    expect(asked).toEqual(["/run/a.sock", "/run/b.sock"]);
  });

  it("keeps the last answer when HAProxy cannot be asked, and has none before a config runs", async () => {
    let running: { text: string; key: string; sha256: string } | null = null;
    let fail = false;
    const probe = certificateProbe(
      () => running,
      async () => {
        if (fail) throw new Error("connection refused");
        return [cert];
      },
    );
    expect(await probe()).toEqual([]);
    running = { text: config("/run/a.sock"), key: "k1", sha256: "s1" };
    expect(await probe()).toEqual([cert]);
    fail = true;
    running = { text: `${config("/run/a.sock")}# another\n`, key: "k2", sha256: "s2" };
    expect(await probe()).toEqual([cert]);
  });

  it("asks again after a certificate was swapped in at run time, the config unchanged", async () => {
    const running = { text: config("/run/a.sock"), key: "k1", sha256: "s1" };
    let swaps = 0;
    let asked = 0;
    const probe = certificateProbe(
      () => running,
      async () => {
        asked++;
        return [cert];
      },
      () => swaps,
    );
    await probe();
    await probe();
    swaps = 1;
    await probe();
    await probe();
    expect(asked).toBe(2);
  });
});
