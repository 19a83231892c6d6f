/*
 * A config's digest: what configs are published, verified and compared by. Two kinds exist, and
 * a digest says which it is wherever it travels (keys' metadata, pings, pins, the agent's state
 * and status): 64 hex digits are the sha256 of the config's bytes, as servicelb has always
 * published; `tree1:` and 64 hex digits are its tree digest (tree-digest.ts), which a warm
 * instance computes in proportion to the change. Digests of the same bytes in different kinds
 * differ: a config published again in the other kind is a new config with the same bytes, which
 * agents apply without a reload (nothing changes).
 *
 * Publishers switch to tree1 only once every agent says it verifies it (app/agent-reports.ts):
 * an agent that knows only sha256 skips a tree1 config as not verifying.
 */
import { z } from "zod";
import { ChunkedSha256, sha256 } from "./sha256.js";
import { ChunkedTreeDigest, SuccessiveTreeDigest, treeDigest } from "./tree-digest.js";

export const DIGEST_KINDS = ["sha256", "tree1"] as const;
export type DigestKind = (typeof DIGEST_KINDS)[number];

const TREE1 = "tree1:";
export const DIGEST = /^(?:tree1:)?[0-9a-f]{64}$/;
export const digestSchema = z.string().regex(DIGEST, "64 hex digits of a sha256, or tree1: and 64 hex digits");

export function digestKind(digest: string): DigestKind {
  return digest.startsWith(TREE1) ? "tree1" : "sha256";
}

/** The 64 hex digits of a digest, without its kind: a key's sha field is the first 16 of them. */
export function digestHex(digest: string): string {
  return digest.startsWith(TREE1) ? digest.slice(TREE1.length) : digest;
}

export function configDigest(kind: DigestKind, config: string | Uint8Array): string {
  return kind === "tree1" ? `${TREE1}${treeDigest(config)}` : sha256(config);
}

/** Digests of one config after another, each from the work the last one left (see the two hashers). */
export interface ConfigHasher {
  readonly kind: DigestKind;
  digest(chunks: readonly Buffer[]): string;
}

export function configHasher(kind: DigestKind): ConfigHasher {
  if (kind === "tree1") {
    const tree = new ChunkedTreeDigest();
    return { kind, digest: (chunks) => `${TREE1}${tree.digest(chunks)}` };
  }
  const flat = new ChunkedSha256();
  return { kind, digest: (chunks) => flat.digest(chunks) };
}

/** Digests of whole configs one after another, as an agent verifies its pulls: tree1 from what the last one left. */
export class SuccessiveDigests {
  private readonly tree = new SuccessiveTreeDigest();

  digest(kind: DigestKind, bytes: Buffer): string {
    return kind === "tree1" ? `${TREE1}${this.tree.digest(bytes)}` : sha256(bytes);
  }
}
