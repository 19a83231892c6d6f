import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildGoAnchor, clusterFile, type GoAnchor, goAnchorConfig, runGoAnchor } from "../../../bench/go-anchor.js";

// CI installs Go (.ci/run), so these run there; a machine without Go skips the ones that build.
const hasGo = spawnSync("go", ["version"]).status === 0;

describe("bench/anchors/go-render", () => {
  it("without Go on PATH, says how to install it and builds nothing", () => {
    const empty = mkdtempSync(join(tmpdir(), "no-go-"));
    expect(buildGoAnchor(undefined, { ...process.env, PATH: empty })).toBe(
      "go is not on PATH (apt-get install -y golang-go): no Go rows, no ratios",
    );
  });

  it.skipIf(!hasGo)(
    "renders the original's config for bench/synthetic.ts's cluster: every Service, endpoint, host and ClientIP affinity",
    () => {
      const anchor = buildGoAnchor() as GoAnchor;
      expect(typeof anchor).toBe("object");
      const cluster = clusterFile(anchor, 12, 3, 1000);
      const cfg = goAnchorConfig(anchor, cluster);
      const backends = [...cfg.matchAll(/^backend (svc-\d+)$/gm)].map((m) => m[1]!);
      // Sorted by name, as the original sorted them (and as an API server lists them).
      expect(backends).toEqual(Array.from({ length: 12 }, (_, i) => `svc-${i}`).sort());
      expect(cfg.match(/^ {4}server 10\.0\.\d+\.\d:8080 10\.0\.\d+\.\d:8080 check port 8080 inter 5$/gm)).toHaveLength(
        36,
      );
      expect(cfg).toContain("    server 10.0.11.2:8080 10.0.11.2:8080 check port 8080 inter 5\n");
      // lb.host on every fifth Service, ClientIP affinity on every third.
      expect([...cfg.matchAll(/hdr\(host\) (\S+)/g)].map((m) => m[1])).toEqual([
        "svc-0.example.com",
        "svc-10.example.com",
        "svc-5.example.com",
      ]);
      const sticky = [...cfg.matchAll(/^backend (svc-\d+)\n(?:(?!backend ).*\n)*? {4}stick on src$/gm)].map(
        (m) => m[1],
      );
      expect(sticky).toEqual(["svc-0", "svc-3", "svc-6", "svc-9"]);
      expect(cfg).toContain("    reqrep ^([^\\ :]*)\\ /svc-7[/]?(.*) \\1\\ /\\2\n");

      const timed = runGoAnchor(anchor, cluster, 2);
      expect(timed).toMatchObject({ services: 12, endpoints: 3, bytes: Buffer.byteLength(cfg) });
      expect(timed.msPerRender).toBeGreaterThanOrEqual(0);
    },
    120_000,
  );
});
