import { createHash } from "node:crypto";

/** Hex sha256 of a config's UTF-8 bytes: the identity configs are published, verified and compared by. */
export function sha256(config: string | Uint8Array): string {
  const hash = createHash("sha256");
  return (typeof config === "string" ? hash.update(config, "utf8") : hash.update(config)).digest("hex");
}
