import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "../adapters/log.js";
import { serverStateFileOf } from "./config-facts.js";
import { NotDurableError, writeFileAtomic } from "./files.js";
import { EMPTY_SERVER_STATE } from "./server-state.js";

/** The files HAProxy reads on the node: its config and its server-state file. */
export class ConfigFiles {
  constructor(
    private readonly configPath: string,
    private readonly log: Logger,
  ) {}

  /** haproxy.cfg ← text, atomically; replaced but not synced to disk (NotDurableError) counts as written. */
  async writeConfig(text: string): Promise<void> {
    try {
      await writeFileAtomic(this.configPath, text);
    } catch (err) {
      if (!(err instanceof NotDurableError)) throw err;
      this.log.warn({ err: err.message }, "the config file was replaced but may not survive a power loss");
    }
  }

  /** HAProxy (and `haproxy -c`) warn about a missing server-state file; an empty one says "no saved state". */
  async ensureServerStateFile(config: string): Promise<void> {
    const path = serverStateFileOf(config);
    if (path && !existsSync(path)) await this.writeServerState(path, EMPTY_SERVER_STATE);
  }

  /** Never throws: a missing state costs health states across a reload, not the reload. */
  async writeServerState(path: string, text: string): Promise<void> {
    try {
      await mkdir(dirname(path), { recursive: true });
      await writeFileAtomic(path, text);
    } catch (err) {
      this.log.warn(
        { path, err: err instanceof Error ? err.message : String(err) },
        "cannot write the server-state file",
      );
    }
  }
}
