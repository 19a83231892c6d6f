/*
 * Waves of a canary rollout (docs/design.md#canary-rollouts): how many nodes each wave admits,
 * and in which order nodes are admitted. The order is a stable function of node names alone (the
 * sha256 of each name), so every reader — the function, `servicelb rollout status`, a test —
 * finds the same canary without coordination, and a node keeps its place across rollouts.
 */

import { z } from "zod";
import { compareStrings } from "../compare.js";
import { sha256 } from "../publish/sha256.js";
import { errorMessage } from "../error-message.js";

/** A wave: a number of nodes, or a share of the fleet (rounded up). */
export type WaveSpec = { nodes: number } | { percent: number };

const WAVE = /^(?:(\d{1,6})|(\d{1,3}(?:\.\d+)?)%)$/;

/** "1,10%,50%,100%": nodes or percentages, growing; the last wave is always the whole fleet. */
export function parseWaves(text: string): WaveSpec[] {
  const parts = text
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  if (parts.length === 0) throw new Error("waves: at least one wave (e.g. 1,10%,50%,100%)");
  if (parts.length > 20) throw new Error(`waves: at most 20, got ${parts.length}`);
  return parts.map((part) => {
    const m = WAVE.exec(part);
    if (!m) throw new Error(`waves: ${JSON.stringify(part)} is neither a number of nodes nor a percentage`);
    if (m[1] !== undefined) {
      const nodes = Number(m[1]);
      if (nodes < 1) throw new Error("waves: a wave admits at least 1 node");
      return { nodes };
    }
    const percent = Number(m[2]);
    if (percent <= 0 || percent > 100) throw new Error(`waves: ${part} is not a share from 0 to 100%`);
    return { percent };
  });
}

/**
 * How many nodes of `total` are admitted once each wave has started: cumulative, strictly
 * growing (a wave that would admit nobody new is dropped), the last one `total`. Empty when there
 * are no nodes.
 */
export function waveSizes(waves: readonly WaveSpec[], total: number): number[] {
  const sizes: number[] = [];
  for (const wave of waves) {
    const wanted = "nodes" in wave ? wave.nodes : Math.ceil((wave.percent * total) / 100);
    const size = Math.min(total, Math.max(1, wanted));
    if (size > (sizes.at(-1) ?? 0)) sizes.push(size);
  }
  if (total > 0 && sizes.at(-1) !== total) sizes.push(total);
  return sizes;
}

/** Nodes in admission order: by the sha256 of the name, then by name. */
export function admissionOrder(nodes: Iterable<string>): string[] {
  return [...new Set(nodes)]
    .map((node) => ({ node, rank: sha256(node) }))
    .sort((a, b) => compareStrings(a.rank, b.rank) || compareStrings(a.node, b.node))
    .map((n) => n.node);
}

export const waveSpecsSchema = z.string().transform((text, ctx) => {
  try {
    return parseWaves(text);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: errorMessage(err) });
    return z.NEVER;
  }
});
