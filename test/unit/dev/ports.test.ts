import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { STACK_PORTS, stackPorts } from "../../../shared/dev/ports.js";

describe("the local stack's internal ports", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((done) => s.close(done));
  });
  const occupy = (port: number) =>
    new Promise<void>((done) => {
      const s = createServer();
      servers.push(s);
      s.listen(port, "127.0.0.1", () => done());
    });

  it("are the same on a restart of the same data dir, and kept in it", async () => {
    const data = mkdtempSync(join(tmpdir(), "servicelb-ports-"));
    const first = await stackPorts(data);
    expect(Object.keys(first)).toEqual([...STACK_PORTS]);
    expect(new Set(Object.values(first)).size).toBe(STACK_PORTS.length);
    expect(JSON.parse(readFileSync(join(data, "ports.json"), "utf8"))).toEqual(first);
    expect(await stackPorts(data)).toEqual(first);
  });

  it("takes --store-port as given, and replaces a saved port that something else holds now", async () => {
    const data = mkdtempSync(join(tmpdir(), "servicelb-ports-"));
    const first = await stackPorts(data);
    await occupy(first.render);
    const second = await stackPorts(data, { s3: 47_123 });
    expect(second.s3).toBe(47_123);
    expect(second.render).not.toBe(first.render);
    expect({ reconcile: second.reconcile, agent: second.agent }).toEqual({
      reconcile: first.reconcile,
      agent: first.agent,
    });
  });

  it("chooses afresh from an unreadable file", async () => {
    const data = mkdtempSync(join(tmpdir(), "servicelb-ports-"));
    writeFileSync(join(data, "ports.json"), "{not json");
    const ports = await stackPorts(data);
    expect(JSON.parse(readFileSync(join(data, "ports.json"), "utf8"))).toEqual(ports);
  });
});
