import { createHash, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? "");
  return m?.[1];
}

/**
 * Constant-time token comparison. Both sides are hashed first: timingSafeEqual needs buffers of
 * equal length, and comparing lengths directly would tell an attacker the token's length.
 */
export function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined || expected === "") return false;
  const a = createHash("sha256").update(given, "utf8").digest();
  const b = createHash("sha256").update(expected, "utf8").digest();
  return timingSafeEqual(a, b);
}

/**
 * Where the expected token comes from. A file is read at every request, so a rotated Secret
 * takes effect without a restart; surrounding whitespace (a trailing newline) is not part of it.
 */
export function tokenSource(opts: { file?: string; token?: string }): () => Promise<string> {
  const { file, token } = opts;
  if (file) return async () => (await readFile(file, "utf8")).trim();
  if (token) return async () => token;
  throw new Error("a notify token file or token is required");
}
