import { createHash } from "node:crypto";

/** Hex sha256 of a config's UTF-8 bytes: the identity configs are published, verified and compared by. */
export function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}
