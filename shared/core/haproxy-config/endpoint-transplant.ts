/*
 * The stable track of a canary rollout (docs/design.md#canary-rollouts): the config the nodes
 * outside the admitted waves run, which is the stable config with the endpoints of the newest
 * one. Endpoints track reality: holding them back during a rollout would send traffic to pods
 * that are gone. Pure: two texts in, one out.
 *
 * Only server lines move: in every backend the two configs have with the same server slots (the
 * same names in the same order, with the same parameters), the stable config's server lines are
 * replaced by the newest's. Everything else stays the stable config's byte for byte, so the track
 * differs from the stable config only in what the agent applies through the runtime API
 * (core/rollout/change-kind.ts calls it an endpoint change). A backend whose slots the structural change
 * reshaped keeps the stable config's endpoints.
 */

import { splitConfig } from "./pattern-files.js";
import { parseServer, sectionOf } from "./server-line.js";

interface Block {
  /** Index of the first server line, and of the line after the last. */
  from: number;
  to: number;
}

export function transplantEndpoints(stable: string, newest: string): string {
  const a = splitConfig(stable);
  const b = splitConfig(newest);
  if ("error" in a || "error" in b) return stable;
  const lines = a.head.split("\n");
  const theirs = b.head.split("\n");
  const ours = serverBlocks(lines);
  const source = serverBlocks(theirs);
  // From the end, so that the indexes of the blocks before stay right.
  for (const [backend, block] of [...ours].reverse()) {
    const other = source.get(backend);
    if (!other || !sameSlots(lines.slice(block.from, block.to), theirs.slice(other.from, other.to))) continue;
    lines.splice(block.from, block.to - block.from, ...theirs.slice(other.from, other.to));
  }
  return lines.join("\n") + stable.slice(a.head.length);
}

/** Each backend's run of server lines. */
function serverBlocks(lines: readonly string[]): Map<string, Block> {
  const blocks = new Map<string, Block>();
  let backend: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const section = sectionOf(lines[i]!);
    if (section !== undefined) backend = section;
    if (backend === null || !lines[i]!.startsWith("    server ")) continue;
    const block = blocks.get(backend);
    // Server lines of a backend are one run in our templates; another run is left alone.
    if (block === undefined) blocks.set(backend, { from: i, to: i + 1 });
    else if (block.to === i) block.to = i + 1;
  }
  return blocks;
}

function sameSlots(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = parseServer(a[i]!);
    const y = parseServer(b[i]!);
    if (!x || !y || x.server !== y.server || x.params !== y.params) return false;
  }
  return true;
}
