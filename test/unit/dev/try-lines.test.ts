import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { tryLines } from "../../../shared/dev/try-lines.js";

const example = join(import.meta.dirname, "..", "..", "..", "examples", "cluster.yaml");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function edited(from: string, to: string): string {
  const dir = mkdtempSync(join(tmpdir(), "try-lines-"));
  dirs.push(dir);
  const text = readFileSync(example, "utf8");
  expect(text).toContain(from);
  writeFileSync(join(dir, "cluster.yaml"), text.replace(from, to));
  return join(dir, "cluster.yaml");
}

describe("the banner's Try lines", () => {
  it("name a Service's path and a Service's host from the cluster file", () => {
    const lines = tryLines(example, 8080);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^ {2}curl http:\/\/127\.0\.0\.1:8080\/(web|shop\/api:8080)\/$/);
    expect(lines[1]).toBe("  curl -H 'Host: api.example.com' http://127.0.0.1:8080/");
  });

  it("follow an edited host, and leave out what the file no longer routes", () => {
    expect(tryLines(edited("lb.host: api.example.com", "lb.host: shop.example.org"), 80)[1]).toBe(
      "  curl -H 'Host: shop.example.org' http://127.0.0.1:80/",
    );
    expect(tryLines(edited("        serviceloadbalancer/lb.host: api.example.com\n", ""), 80)).toHaveLength(1);
  });

  it("are none for a file that does not read as a cluster", () => {
    expect(tryLines(edited("kind: List", "kind: [List"), 80)).toEqual([]);
  });
});
