import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand } from "@aws-sdk/client-s3";
import { describe, expect, it } from "vitest";
import { A, agentWorld, B, C, web } from "../support/agent.js";
import { waitFor } from "../support/net.js";

/*
 * Configs published in chunks (chunks1), through a real agent, HAProxy and s3rver: an agent that
 * ran the config before takes the next one from its object alone (the chunks it lacked ride
 * inline), and one that must fetch a chunk that does not hash to its name applies nothing of
 * that config: it runs the newest config it can assemble whole.
 */

const world = agentWorld();
const { node, start, served, appliedKey } = world;

/** `web` served by `ip`, beside 300 other Services: a config of many chunks, one of which holds `web`. */
const cluster = (ip: string) => [
  ...web("web", world.pods.port, [ip]),
  ...Array.from({ length: 300 }, (_, i) => web(`filler-${i}`, world.pods.port, [A])).flat(),
];

describe("an agent on configs published in chunks", () => {
  it("takes an endpoint change at runtime from one object that holds only what changed", async () => {
    const n = await node();
    const v1 = await n.publish(cluster(A), 100, "tree1", true);
    const agent = await start(n);
    await appliedKey(agent, v1.key);
    await served(n, "/web/", "A");
    const reloads = await n.reloads();
    const v2 = await n.publish(cluster(B), 110, "tree1", true);
    const head = await world.s3.client.send(new HeadObjectCommand({ Bucket: world.s3.bucket, Key: v2.key }));
    expect(head.ContentType).toBe("application/vnd.servicelb.chunks1+gzip");
    // The object carries the chunks v1 lacked, not the config: a fraction of it.
    expect(head.ContentLength).toBeLessThan(Buffer.byteLength(n.lastConfig()) / 4);
    expect((await n.notify(agent, v2)).status).toBe(202);
    await appliedKey(agent, v2.key);
    expect(agent.status().applied).toMatchObject({ key: v2.key, sha256: v2.sha256, how: "runtime" });
    await served(n, "/web/", "B");
    expect(await n.reloads()).toBe(reloads);
  });

  it("a chunk that does not hash to its name: nothing of that config is applied, the agent runs the newest it can assemble", async () => {
    const n = await node();
    const v1 = await n.publish(cluster(A), 100, "tree1", true);
    const v2 = await n.publish(cluster(C), 110, "tree1", true);
    // v1's object carries every chunk inline (it was the first); v2's the one that changed. A new
    // agent fetches v2's other chunks from chunks/: each now holds other bytes of the same size.
    const listed = await world.s3.client.send(
      new ListObjectsV2Command({ Bucket: world.s3.bucket, Prefix: `${n.prefix}/chunks/` }),
    );
    expect(listed.KeyCount).toBeGreaterThan(0);
    for (const o of listed.Contents ?? []) {
      const got = await world.s3.client.send(new GetObjectCommand({ Bucket: world.s3.bucket, Key: o.Key! }));
      const bytes = Buffer.from(await got.Body!.transformToByteArray());
      await world.s3.client.send(
        new PutObjectCommand({
          Bucket: world.s3.bucket,
          Key: o.Key!,
          Body: Buffer.from(bytes.toString("latin1").replaceAll("e", "E"), "latin1"),
        }),
      );
    }
    const agent = await start(n);
    await waitFor("v2 refused", async () => (agent.status().skipped?.some((s) => s.key === v2.key) ? true : undefined));
    expect(agent.status().skipped?.find((s) => s.key === v2.key)?.reason).toMatch(/chunk/);
    await appliedKey(agent, v1.key);
    await served(n, "/web/", "A");
  });
});
