import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { changeKind } from "../../../../shared/core/rollout/change-kind.js";
import { transplantEndpoints } from "../../../../shared/core/haproxy-config/endpoint-transplant.js";

const config = (o: { web: string[]; shop: string[]; shopExtra?: string; timeout?: string }) => `global
    stats socket /run/haproxy/admin.sock mode 600 level admin

defaults
    mode http
    timeout connect ${o.timeout ?? "5s"}

backend default_shop_80${o.shopExtra ?? ""}
    balance roundrobin
${o.shop.map((s, i) => `    server s${i + 1} ${s}`).join("\n")}

backend default_web_80
    balance roundrobin
${o.web.map((s, i) => `    server s${i + 1} ${s}`).join("\n")}
`;

describe("transplantEndpoints", () => {
  it("gives the stable config the newest endpoints and keeps its structure", () => {
    const stable = config({ web: ["10.0.0.1:80", "127.0.0.1:1 disabled"], shop: ["10.0.1.1:80"] });
    const newest = config({
      web: ["10.0.0.2:80", "10.0.0.3:80"],
      shop: ["10.0.1.2:80"],
      timeout: "9s",
    });
    const track = transplantEndpoints(stable, newest);
    expect(track).toBe(config({ web: ["10.0.0.2:80", "10.0.0.3:80"], shop: ["10.0.1.2:80"] }));
    expect(changeKind(stable, track)).toBe("endpoints");
  });

  it("keeps the stable endpoints of a backend the structural change reshaped", () => {
    const stable = config({ web: ["10.0.0.1:80"], shop: ["10.0.1.1:80"] });
    const newest = config({ web: ["10.0.0.2:80", "10.0.0.3:80"], shop: ["10.0.1.2:80 check"] });
    expect(transplantEndpoints(stable, newest)).toBe(config({ web: ["10.0.0.1:80"], shop: ["10.0.1.1:80"] }));
  });

  it("makes only endpoint changes, whatever the two configs' endpoints (property)", () => {
    const ip = fc
      .tuple(fc.integer({ min: 1, max: 254 }), fc.integer({ min: 1, max: 254 }))
      .map(([a, b]) => `10.0.${a}.${b}:80`);
    const slot = fc.oneof(ip, fc.constant("127.0.0.1:1 disabled"));
    const side = fc.record({
      web: fc.array(slot, { minLength: 1, maxLength: 4 }),
      shop: fc.array(slot, { minLength: 1, maxLength: 4 }),
      timeout: fc.constantFrom("5s", "6s"),
    });
    fc.assert(
      fc.property(side, side, (s, n) => {
        const stable = config(s);
        const track = transplantEndpoints(stable, config(n));
        expect(["identical", "endpoints"]).toContain(changeKind(stable, track));
        // Where the shapes agree, the newest endpoints are what the track runs.
        if (s.web.length === n.web.length)
          expect(track).toContain(n.web.map((x, i) => `    server s${i + 1} ${x}`).join("\n"));
      }),
    );
  });
});
