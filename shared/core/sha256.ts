import { createHash } from "node:crypto";
import { z } from "zod";

/** Hex sha256 of a config's UTF-8 bytes: the identity configs are published, verified and compared by. */
export function sha256(config: string | Uint8Array): string {
  const hash = createHash("sha256");
  return (typeof config === "string" ? hash.update(config, "utf8") : hash.update(config)).digest("hex");
}

/** A whole sha256 as sha256() gives it: 64 lowercase hex digits. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;
export const sha256Schema = z.string().regex(SHA256_HEX, "64 hex digits");
