/*
 * `servicelb render --out DIR`: the files the agent would put on disk (core/haproxy-config/pattern-files.ts
 * nodeFiles), written into DIR, so that `haproxy -c -f DIR/haproxy.cfg` loads the dry run's output
 * as a node loads the config. DIR is created when missing and replaced when it holds a previous
 * render, whose pattern files a Service since removed would otherwise leave behind. Anything else
 * in DIR is the user's: it is refused, never mixed into or deleted.
 */

import type { Dirent } from "node:fs";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { CONFIG_FILE, isPatternFilePath, type NodeFile, PATTERN_DIRS } from "../core/haproxy-config/pattern-files.js";
import { OptionsError } from "../core/settings/settings.js";

export async function writeRenderDir(dir: string, files: readonly NodeFile[]): Promise<void> {
  await checkRenderDir(dir);
  for (const sub of PATTERN_DIRS) await rm(join(dir, sub), { recursive: true, force: true });
  for (const file of files) {
    await mkdir(dirname(join(dir, file.path)), { recursive: true });
    await writeFile(join(dir, file.path), file.text);
  }
}

/** Throws unless a render may write into `dir`: before a render, so that a refusal costs no cluster list. */
export async function checkRenderDir(dir: string): Promise<void> {
  const foreign = await notRendered(dir);
  if (foreign.length > 0) {
    const named = foreign.slice(0, 3).join(", ") + (foreign.length > 3 ? ` and ${foreign.length - 3} more` : "");
    throw new OptionsError(
      `--out ${dir}: the directory is not empty and is not a previous render (it holds ${named}); give a new or empty directory, or one a render wrote`,
    );
  }
}

/** What in `dir` no render writes: anything but haproxy.cfg and pattern files in their folders. */
async function notRendered(dir: string): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return [];
    if (code === "ENOTDIR") throw new OptionsError(`--out ${dir}: not a directory`);
    throw err;
  }
  const out: string[] = [];
  for (const entry of entries) {
    if (entry.name === CONFIG_FILE && entry.isFile()) continue;
    if ((PATTERN_DIRS as readonly string[]).includes(entry.name) && entry.isDirectory()) {
      for (const inner of await readdir(join(dir, entry.name), { withFileTypes: true })) {
        const path = `${entry.name}/${inner.name}`;
        if (!inner.isFile() || !isPatternFilePath(path)) out.push(path);
      }
      continue;
    }
    out.push(entry.name);
  }
  return out.sort();
}
