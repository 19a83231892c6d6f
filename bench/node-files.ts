/*
 * A rendered config written into a directory as the agent writes it beside HAProxy (haproxy.cfg,
 * maps/, patterns/), for the benches that run HAProxy on a config of their own.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { nodeFiles } from "../shared/core/haproxy-config/pattern-files.js";

/** Replaces `dir` with the config's files; the path of its haproxy.cfg. */
export function writeNodeFiles(config: string, dir: string): string {
  rmSync(dir, { recursive: true, force: true });
  const files = nodeFiles(config);
  if ("error" in files) throw new Error(files.error);
  for (const f of files) {
    mkdirSync(dirname(join(dir, f.path)), { recursive: true });
    writeFileSync(join(dir, f.path), f.text);
  }
  return join(dir, "haproxy.cfg");
}
