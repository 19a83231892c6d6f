import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildModel } from "../../../../shared/core/model/build-model.js";
import type { Backend, Model } from "../../../../shared/core/model/model.js";
import { parseRenderOptions } from "../../../../shared/core/settings/options.js";
import { Renderer } from "../../../../shared/core/render/render.js";
import { serviceMapLine } from "../../../../shared/core/haproxy-config/service-map.js";
import { ChunkedSha256, sha256 } from "../../../../shared/core/publish/sha256.js";
import { ChunkedTreeDigest, treeDigest } from "../../../../shared/core/publish/tree-digest.js";
import { assignSlots, slotCookies } from "../../../../shared/core/model/slots.js";
import { snapshotFromDocuments } from "../../../../shared/core/kubernetes/snapshot.js";
import { loadTemplates } from "../../../../shared/adapters/templates.js";
import { list, service, slice } from "../../../support/fixtures.js";

/**
 * A warm renderer across many renders of models whose backends change a few at a time (the model
 * builder's warm pass: unchanged backends are the very objects of the last model), over enough
 * backends for several blocks of the renderer's output.
 */
const templates = loadTemplates();
const options = parseRenderOptions({});
/** Renderer's BLOCK. */
const BLOCK = 64;

function model(services: number): Model {
  const items = [];
  for (let i = 0; i < services; i++) {
    const name = `svc-${String(i).padStart(4, "0")}`;
    items.push(service(name, [{ port: 80, name: "p" }]));
    items.push(slice(name, [{ name: "p", port: 8080 }], [`10.0.${i % 256}.1`, `10.1.${i % 256}.2`]));
  }
  return buildModel(snapshotFromDocuments([list(items)]), options);
}

const step = fc.record({
  op: fc.constantFrom("endpoints", "endpoints", "endpoints", "add", "remove"),
  at: fc.nat(),
  address: fc.ipV4(),
});
type Step = typeof step extends fc.Arbitrary<infer T> ? T : never;

/** The next model: the same backend objects but for the one this step replaces, adds or removes. */
function next(m: Model, s: Step, n: number): Model {
  const backends = m.backends.slice();
  const at = s.at % backends.length;
  const b = backends[at]!;
  if (s.op === "endpoints") {
    const servers = assignSlots([`${s.address}:8080`], options.minServerSlots);
    backends[at] = { ...b, servers, cookies: b.cookies && slotCookies(servers) };
  } else if (s.op === "add") {
    // Sorts right after `b`, as the model builder sorts backends by name.
    const added: Backend = { ...b, name: `${b.name}-${n}`, service: `${b.service}-${n}` };
    backends.splice(at + 1, 0, added);
  } else if (backends.length > 1) {
    backends.splice(at, 1);
  }
  return { ...m, backends };
}

/** Bytes of `after` that lie outside every chunk of `before` (disjoint ranges): what the render wrote anew. */
function writtenAnew(before: readonly Buffer[], after: readonly Buffer[]): number {
  let fresh = 0;
  for (const c of after) {
    let kept = 0;
    for (const b of before) {
      if (b.buffer !== c.buffer) continue;
      const from = Math.max(b.byteOffset, c.byteOffset);
      const to = Math.min(b.byteOffset + b.length, c.byteOffset + c.length);
      if (to > from) kept += to - from;
    }
    fresh += c.length - kept;
  }
  return fresh;
}

describe("a warm renderer", () => {
  it("renders what a cold render gives, in at most a chunk per block of backends, however many renders it made", () => {
    const start = model(300);
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), (steps) => {
        const warm = new Renderer(templates);
        const hasher = new ChunkedSha256();
        const tree = new ChunkedTreeDigest();
        let m = start;
        warm.renderChunks(m);
        for (const [n, s] of steps.entries()) {
          m = next(m, s, n);
          const { chunks } = warm.renderChunks(m);
          const cold = new Renderer(templates).renderBytes(m);
          expect(Buffer.concat(chunks).equals(cold)).toBe(true);
          expect(hasher.digest(chunks)).toBe(sha256(cold));
          expect(tree.digest(chunks)).toBe(treeDigest(cold));
          // Every chunk but the last ends a line: the tree digest never joins the config to hash it.
          for (const c of chunks.slice(0, -1)) if (c.length > 0) expect(c[c.length - 1]).toBe(0x0a);
          // The main template's parts, the rules, and one range per block.
          const blocks = Math.ceil(m.backends.length / BLOCK);
          expect(chunks.length).toBeLessThanOrEqual(blocks + 8);
        }
      }),
      { numRuns: 30 },
    );
  });

  it("writes anew only the block of a changed backend", () => {
    const warm = new Renderer(templates);
    let m = model(300);
    let before = warm.renderChunks(m).chunks;
    for (const at of [0, 70, 299, 150]) {
      m = next(m, { op: "endpoints", at, address: "192.0.2.1" }, 0);
      const after = warm.renderChunks(m).chunks;
      const block = Math.floor(at / BLOCK);
      const blockBackends = m.backends.slice(block * BLOCK, (block + 1) * BLOCK);
      // Less the block's lines of the Service map, which an endpoint change leaves as they were.
      const mapBytes = blockBackends.reduce((n, b) => n + Buffer.byteLength(`#| ${serviceMapLine(b)}\n`), 0);
      const blockBytes =
        new Renderer(templates).renderBytes({ ...m, backends: blockBackends }).length -
        new Renderer(templates).renderBytes({ ...m, backends: [] }).length -
        mapBytes;
      expect(writtenAnew(before, after)).toBe(blockBytes);
      before = after;
    }
  });
});
