import { randomBytes } from "node:crypto";
import { open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { errorMessage } from "../core/error-message.js";

/**
 * The new data is in place (renamed over the target) but syncing the directory failed, so the
 * rename may not survive a power loss: every reader sees the new file, i.e. it was written.
 */
export class NotDurableError extends Error {
  override readonly name = "NotDurableError";
}

/**
 * Replaces `path` with `data` so that a reader (HAProxy re-reading its config on reload, the
 * agent after a crash) sees the old file or the new one, never a mix: write a temporary file in
 * the same directory, fsync it, rename it over the target, fsync the directory. A failure after
 * the rename throws NotDurableError: the file was replaced all the same.
 */
export async function writeFileAtomic(path: string, data: string, mode = 0o644): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const file = await open(tmp, "w", mode);
  try {
    await file.writeFile(data);
    await file.sync();
  } catch (err) {
    await file.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await file.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  try {
    const d = await open(dir, "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch (err) {
    throw new NotDurableError(`${path} was replaced, but syncing ${dir} failed: ${errorMessage(err)}`, { cause: err });
  }
}

/** The file's text, or null when it does not exist. */
export async function readIfExists(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}
